"""Filter and prioritize latency against two floors measured in the same run (issue 7).

    python -m tests.benchmarks.bench [--quick] [--json FILE] [--policies N]

Starts the real service (`python -m extender serve`: uvicorn, one worker, uvloop,
httptools, no access log) on 127.0.0.1 with a static policy of three metrics that
covers every node, herd guard on, and for 100, 1,000 and 5,000 nodes, in `NodeNames`
form (cloud-style names) and in full `Nodes` form (nodes shaped like the captured
fixture), measures filter and prioritize:

- server time p50/p99 from the `Server-Timing` header, client round trip p50/p99 at
  concurrency 1 (a keep-alive http.client loop), requests/s at concurrency 1 and 4 (wrk);
- the orjson floor: `orjson.loads(body)` + `orjson.dumps(answer)` in-process, where
  `answer` is what the service returned, decoded first;
- the echo floor: tests/benchmarks/echo.py (a bare starlette echo) served the same way,
  measured with the same client and wrk settings;
- ratio_orjson = server p50 / orjson floor, ratio_echo = rtt p50 / echo rtt p50,
  ratio_rps = rps c1 / echo rps c1; RSS idle (5,000-node snapshot loaded), warm (after
  the first rows' requests) and after 10,000 more requests (2,000 with --quick).

With `--policies N` (N > 1) the policy file has N named policies p1..pN over the same
three metrics, each with other weights and thresholds (so N different tables, every node
still passing), `defaultPolicy: p1`, and the measured pod names the last one, pN, with the
annotation decice.io/policy: a lookup by name, not the default. Before measuring, one
prioritize per policy checks that each answers every node and that pN's answer is not
p1's (the annotation is honoured). N = 1 sends exactly the policy and bodies of before.

Every loop is bounded in count and in time; a full run takes about three minutes on
2 cores. Not part of the test run (tests/benchmarks/test_bench_quick.py runs `--quick`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.harness.loopback import end_process, free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "kube-scheduler"
LUA = HERE / "post.lua"
ECHO = HERE / "echo.py"
HOST = "127.0.0.1"
VERBS = ("filter", "prioritize")
FORMS = ("names", "nodes")
RSS_REQUESTS = 10_000
POLICY_ANNOTATION = "decice.io/policy"

KEYS = (
    "verb",
    "nodes",
    "form",
    "server_p50_ms",
    "server_p99_ms",
    "rtt_p50_ms",
    "rtt_p99_ms",
    "rps_c1",
    "rps_c4",
    "floor_orjson_ms",
    "floor_echo_ms",
    "floor_echo_rps_c1",
    "ratio_orjson",
    "ratio_echo",
    "ratio_rps",
    "answer_bytes",
    "answer_hosts",
)


@dataclass(frozen=True)
class Budget:
    """How long each measurement may run: (max requests, seconds) per loop, wrk seconds."""

    loop_count: int
    loop_seconds: float
    wrk_seconds: int
    floor_count: int
    floor_seconds: float
    rss_requests: int = RSS_REQUESTS
    """Requests between the "warm" and "after" RSS readings."""


FULL = Budget(loop_count=3000, loop_seconds=2.0, wrk_seconds=3, floor_count=2000, floor_seconds=1.0)
QUICK = Budget(
    loop_count=300,
    loop_seconds=0.3,
    wrk_seconds=1,
    floor_count=300,
    floor_seconds=0.2,
    rss_requests=2_000,
)


# -- inputs --------------------------------------------------------------------------------


def node_names(n: int) -> list[str]:
    """Cloud-style names, ~40 characters: ip-10-0-12-34.eu-west-1.compute.internal."""
    return [
        f"ip-10-{i // 62500}-{i // 250 % 250}-{i % 250 + 1}.eu-west-1.compute.internal"
        for i in range(n)
    ]


def policy(names: Sequence[str], port: int, policies: int = 1) -> dict[str, Any]:
    """Three metrics over a static snapshot covering every node; every node passes, with
    the captured pod's expected use (500m over 4 default cores: 0.125) under cpu's 0.9.

    With `policies` > 1: that many named policies p1..pN (see `named_policies`) instead of
    top-level metrics, p1 the default."""
    rng = random.Random(7)
    nodes = {
        n: {
            "cpu": round(rng.uniform(0.05, 0.75), 4),
            "memory": round(rng.uniform(0.1, 0.9), 4),
            "disk": round(rng.uniform(0.0, 1.0), 4),
        }
        for n in names
    }
    shape: dict[str, Any] = {"metrics": policy_metrics(1)}
    if policies > 1:
        shape = {"policies": named_policies(policies), "defaultPolicy": policy_name(1)}
    return {
        "schedulerNames": ["decice_sched"],
        "server": {"host": HOST, "port": port},
        "provider": "static",
        "static": {"nodes": nodes},
        **shape,
        "herdGuard": {"enabled": True, "metric": "cpu"},
        "bind": {"enabled": False},
    }


def policy_name(i: int) -> str:
    return f"p{i}"


def policy_metrics(i: int) -> list[dict[str, Any]]:
    """The metrics of policy i (1-based); i = 1 is the single policy of every earlier run.

    The same three metrics (same names, no query: static) with weights and the cpu
    threshold changing with i, so each policy has a table of its own; cpu values stay
    below 0.75, so every node passes every policy's threshold. Integers where they were
    integers, so policy 1 serializes byte for byte as before."""
    return [
        {
            "name": "cpu",
            "weight": 2,
            "direction": "lower",
            "filter": {"above": round(0.9 + (i - 1) / 100, 2)},
        },
        {"name": "memory", "weight": i, "direction": "lower"},
        {"name": "disk", "weight": (i + 1) // 2, "direction": "lower", "onMissing": "fail-open"},
    ]


def named_policies(n: int) -> dict[str, Any]:
    return {policy_name(i): {"metrics": policy_metrics(i)} for i in range(1, n + 1)}


def request_body(names: Sequence[str], form: str, policy: str | None = None) -> bytes:
    """ExtenderArgs for the captured pod, in NodeNames form or full Nodes form; with
    `policy`, the pod names that policy (annotation decice.io/policy)."""
    captured = orjson.loads((FIXTURES / "filter-fullnodes.json").read_bytes())
    if policy is not None:
        meta = captured["Pod"]["metadata"]
        meta["annotations"] = {**meta.get("annotations", {}), POLICY_ANNOTATION: policy}
    if form == "names":
        return orjson.dumps({"Pod": captured["Pod"], "Nodes": None, "NodeNames": list(names)})
    template = orjson.dumps(captured["Nodes"]["items"][0])
    items = []
    for i, name in enumerate(names):
        node = orjson.loads(template)
        node["metadata"]["name"] = name
        node["metadata"]["uid"] = str(uuid.UUID(int=i + 1))
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        for address in node.get("status", {}).get("addresses", []):
            if address.get("type") == "Hostname":
                address["address"] = name
        items.append(node)
    node_list = {"metadata": captured["Nodes"].get("metadata", {}), "items": items}
    return orjson.dumps({"Pod": captured["Pod"], "Nodes": node_list, "NodeNames": None})


def answer_hosts(verb: str, answer: Any) -> int:
    if verb == "prioritize":
        return len(answer)
    if answer.get("NodeNames") is not None:
        return len(answer["NodeNames"])
    return len((answer.get("Nodes") or {}).get("items") or [])


# -- processes -----------------------------------------------------------------------------


@contextlib.contextmanager
def running(argv: list[str], port: int, ready_path: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server subprocess, wait (bounded) until `ready_path` answers 200, stop it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[2:4]} exited with {proc.returncode} before ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[2:4]} not ready after 60 s")
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn = http.client.HTTPConnection(HOST, port, timeout=2)
                conn.request("GET", ready_path)
                if conn.getresponse().status == 200:
                    conn.close()
                    break
                conn.close()
            time.sleep(0.1)
        yield proc
    finally:
        end_process(proc)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def served_requests(port: int) -> int:
    """Requests the service has answered, from its own /metrics counter."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return int(
        sum(float(m) for m in re.findall(r"^decice_requests_total\{.*\} (\S+)$", text, re.M))
    )


# -- measurements --------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


@dataclass
class Loop:
    rtt_ms: list[float]
    server_ms: list[float]
    answer: bytes


def client_loop(port: int, path: str, body: bytes, budget: Budget) -> Loop:
    """Concurrency 1, keep-alive: round trip per request, Server-Timing when present."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    rtt: list[float] = []
    server: list[float] = []
    answer = b""
    # Warm up: connection, caches, the first table lookups.
    warm_until = time.perf_counter() + budget.loop_seconds / 4
    for _ in range(20):
        conn.request("POST", path, body, headers)
        conn.getresponse().read()
        if time.perf_counter() > warm_until:
            break
    deadline = time.perf_counter() + budget.loop_seconds
    hard = deadline + budget.loop_seconds * 4
    for i in range(budget.loop_count):
        now = time.perf_counter()
        if now > hard or (now > deadline and i >= 20):
            break
        t0 = time.perf_counter()
        conn.request("POST", path, body, headers)
        resp = conn.getresponse()
        answer = resp.read()
        rtt.append((time.perf_counter() - t0) * 1000)
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {answer[:200]!r}")
        timing = resp.getheader("Server-Timing")
        if timing:
            server.append(float(timing.split("dur=", 1)[1].split(",", 1)[0]))
    conn.close()
    return Loop(rtt, server, answer)


def orjson_floor(body: bytes, answer: bytes, budget: Budget, pause_gc: bool = True) -> float:
    """Median ms of loads(body) + dumps(the answer as Python objects).

    With `pause_gc` (the floor the ratios use) the cyclic GC is off while the decoded body
    lives, as the service does: the strict floor. Without it, a 10 MB NodeList decodes
    ~2.5x slower, and the service would look faster than orjson itself.
    """
    decoded = orjson.loads(answer)
    samples: list[float] = []
    deadline = time.perf_counter() + budget.floor_seconds
    for i in range(budget.floor_count):
        if i >= 5 and time.perf_counter() > deadline:
            break
        if pause_gc:
            gc.disable()
        t0 = time.perf_counter()
        orjson.loads(body)
        orjson.dumps(decoded)
        samples.append((time.perf_counter() - t0) * 1000)
        gc.enable()
    return statistics.median(samples)


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def wrk_rps(
    port: int,
    path: str,
    body_file: Path,
    threads: int,
    conns: int,
    seconds: int,
    max_per_thread: int | None = None,
) -> float | None:
    """Requests/s from wrk, or None when wrk is not installed."""
    if not have_wrk():
        return None
    env = {**os.environ, "BENCH_BODY": str(body_file)}
    if max_per_thread is not None:
        env["BENCH_MAX"] = str(max_per_thread)
    argv = [
        "wrk",
        f"-t{threads}",
        f"-c{conns}",
        f"-d{seconds}s",
        "--timeout",
        "30s",
        "-s",
        str(LUA),
        f"http://{HOST}:{port}{path}",
    ]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed: {out.stderr.strip()}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out.stdout)
    if bad:
        raise RuntimeError(f"wrk {path}: {bad.group(1)} non-2xx responses")
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
    if rps is None:
        raise RuntimeError(f"no Requests/sec in wrk output:\n{out.stdout}")
    return float(rps.group(1))


def r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def measure_echo(
    port: int, body: bytes, body_file: Path, budget: Budget
) -> tuple[float, float | None]:
    loop = client_loop(port, "/filter", body, budget)
    if loop.answer != body:
        raise RuntimeError("echo server changed the body")
    return pct(loop.rtt_ms, 50), wrk_rps(port, "/filter", body_file, 1, 1, budget.wrk_seconds)


def measure_row(
    port: int,
    verb: str,
    n: int,
    form: str,
    body: bytes,
    body_file: Path,
    echo: tuple[float, float | None],
    budget: Budget,
) -> dict[str, Any]:
    path = f"/{verb}"
    loop = client_loop(port, path, body, budget)
    floor = orjson_floor(body, loop.answer, budget)
    floor_gc = orjson_floor(body, loop.answer, budget, pause_gc=False)
    rps1 = wrk_rps(port, path, body_file, 1, 1, budget.wrk_seconds)
    rps4 = wrk_rps(port, path, body_file, 2, 4, budget.wrk_seconds)
    server50 = pct(loop.server_ms, 50)
    rtt50 = pct(loop.rtt_ms, 50)
    echo_rtt, echo_rps = echo
    row = {
        "verb": verb,
        "nodes": n,
        "form": form,
        "server_p50_ms": r3(server50),
        "server_p99_ms": r3(pct(loop.server_ms, 99)),
        "rtt_p50_ms": r3(rtt50),
        "rtt_p99_ms": r3(pct(loop.rtt_ms, 99)),
        "rps_c1": r3(rps1),
        "rps_c4": r3(rps4),
        "floor_orjson_ms": r3(floor),
        "floor_echo_ms": r3(echo_rtt),
        "floor_echo_rps_c1": r3(echo_rps),
        "ratio_orjson": ratio(server50, floor),
        "ratio_echo": ratio(rtt50, echo_rtt),
        "ratio_rps": ratio(rps1, echo_rps),
        "answer_bytes": len(loop.answer),
        "answer_hosts": answer_hosts(verb, orjson.loads(loop.answer)),
        "floor_orjson_gc_ms": r3(floor_gc),
        "samples": len(loop.rtt_ms),
    }
    return row


def top_up(port: int, body_file: Path, target: int) -> int:
    """Send prioritize requests until the service has answered `target` in all (bounded).

    wrk sleeps out its whole -d even once every thread has stopped at BENCH_MAX, so it
    runs in short slices (2 s) until the count is reached, 60 s at most in all."""
    deadline = time.monotonic() + 60
    while have_wrk() and time.monotonic() < deadline:
        missing = target - served_requests(port)
        if missing <= 0:
            break
        wrk_rps(port, "/prioritize", body_file, 1, 1, 2, max_per_thread=missing)
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    body = body_file.read_bytes()
    for _ in range(RSS_REQUESTS):  # without wrk: the Python client, still bounded
        if served_requests(port) >= target:
            break
        for _ in range(100):
            conn.request("POST", "/prioritize", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
    conn.close()
    return served_requests(port)


def check_policies(port: int, names: Sequence[str], policies: int) -> dict[str, int]:
    """One prioritize per policy (NodeNames form): policy -> hosts answered. Raises when a
    policy does not answer every node or pN answers exactly as p1 (annotation ignored)."""
    hosts: dict[str, int] = {}
    answers: dict[str, bytes] = {}
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    for i in range(1, policies + 1):
        name = policy_name(i)
        body = request_body(names, "names", name)
        conn.request("POST", "/prioritize", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        answers[name] = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"policy {name}: HTTP {resp.status}: {answers[name][:200]!r}")
        hosts[name] = answer_hosts("prioritize", orjson.loads(answers[name]))
    conn.close()
    short = {k: v for k, v in hosts.items() if v != len(names)}
    if short:
        raise RuntimeError(f"policies answering fewer than {len(names)} hosts: {short}")
    first, last = policy_name(1), policy_name(policies)
    if policies > 1 and answers[first] == answers[last]:
        raise RuntimeError(f"{last} answered exactly as {first}: is the annotation read?")
    return hosts


def run(
    sizes: Sequence[int], forms: Sequence[str], budget: Budget, log: Any, policies: int = 1
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    rss: dict[str, Any] = {}
    checked: dict[str, dict[str, int]] = {}
    named = policy_name(policies) if policies > 1 else None
    with tempfile.TemporaryDirectory(prefix="decice-bench-") as tmp:
        work = Path(tmp)
        echo_port = free_port()
        echo_argv = [sys.executable, str(ECHO), str(echo_port)]
        with running(echo_argv, echo_port, "/healthz"):
            for n in sizes:
                names = node_names(n)
                port = free_port()
                config = work / f"policy-{n}.yaml"
                config.write_bytes(orjson.dumps(policy(names, port, policies)))  # JSON is YAML
                argv = [
                    sys.executable,
                    "-m",
                    "extender",
                    "serve",
                    "--config",
                    str(config),
                    "--log-level",
                    "warning",
                ]
                log(f"-- {n} nodes: starting the service")
                with running(argv, port, "/readyz") as service:
                    if n == max(sizes):
                        rss["nodes"] = n
                        rss["idle"] = round(rss_mb(service.pid), 1)
                    if named is not None:
                        checked[str(n)] = check_policies(port, names, policies)
                    for form in forms:
                        body = request_body(names, form, named)
                        body_file = work / f"body-{n}-{form}.json"
                        body_file.write_bytes(body)
                        echo = measure_echo(echo_port, body, body_file, budget)
                        for verb in VERBS:
                            row = measure_row(port, verb, n, form, body, body_file, echo, budget)
                            row["policies"] = policies
                            results.append(row)
                            log(format_row(row))
                        if n == max(sizes) and form == "names":
                            # "warm": after the rows above (thousands of requests); the first
                            # requests grow the heap once. "after": rss_requests later.
                            rss["warm"] = round(rss_mb(service.pid), 1)
                            served = served_requests(port)
                            target = served + budget.rss_requests
                            rss["requests"] = top_up(port, body_file, target)
                            rss["requests_since_warm"] = rss["requests"] - served
                            rss["after"] = round(rss_mb(service.pid), 1)
                    if n == max(sizes):
                        rss["after_all_forms"] = round(rss_mb(service.pid), 1)
                        rss["requests_all_forms"] = served_requests(port)
    return {
        "policies": policies,
        "policy_named": named,
        "policy_hosts": checked,
        "rss_mb": rss,
        "results": results,
    }


# -- output --------------------------------------------------------------------------------

COLUMNS = (
    ("verb", "verb", "{}"),
    ("form", "form", "{}"),
    ("nodes", "nodes", "{}"),
    ("server_p50_ms", "srv p50", "{:.3f}"),
    ("server_p99_ms", "srv p99", "{:.3f}"),
    ("rtt_p50_ms", "rtt p50", "{:.3f}"),
    ("rtt_p99_ms", "rtt p99", "{:.3f}"),
    ("rps_c1", "rps c1", "{:.0f}"),
    ("rps_c4", "rps c4", "{:.0f}"),
    ("floor_orjson_ms", "orjson", "{:.3f}"),
    ("floor_echo_ms", "echo", "{:.3f}"),
    ("floor_echo_rps_c1", "echo rps", "{:.0f}"),
    ("ratio_orjson", "r_orjson", "{:.2f}"),
    ("ratio_echo", "r_echo", "{:.2f}"),
    ("ratio_rps", "r_rps", "{:.2f}"),
    ("answer_bytes", "bytes", "{}"),
    ("answer_hosts", "hosts", "{}"),
)
WIDTHS = (10, 5, 5, 8, 8, 8, 8, 7, 7, 8, 7, 8, 8, 6, 5, 9, 5)


def cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def format_header() -> str:
    return " ".join(title.rjust(w) for (_, title, _), w in zip(COLUMNS, WIDTHS, strict=True))


def format_row(row: dict[str, Any]) -> str:
    return " ".join(
        cell(row, key, fmt).rjust(w) for (key, _, fmt), w in zip(COLUMNS, WIDTHS, strict=True)
    )


# Targets at the sizes the issue names: (verb, form, nodes, key, limit).
TARGETS = tuple(
    [(v, "names", 5000, "ratio_orjson", 2.0) for v in VERBS]
    + [(v, "names", 5000, "ratio_echo", 3.0) for v in VERBS]
    + [(v, "names", 100, "ratio_echo", 1.5) for v in VERBS]
    + [(v, "nodes", 5000, "ratio_orjson", 1.5) for v in VERBS]
)


def target_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for verb, form, n, key, limit in TARGETS:
        row = next(
            (r for r in results if (r["verb"], r["form"], r["nodes"]) == (verb, form, n)), None
        )
        if row is None or row[key] is None:
            continue
        verdict = "met" if row[key] <= limit else f"MISSED by {row[key] / limit - 1:.0%}"
        lines.append(f"{verb:>10} {form:>5} {n:>5}  {key} {row[key]:.2f} <= {limit}: {verdict}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100 nodes, short loops (a few seconds)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--sizes", help="comma-separated node counts (default 100,1000,5000)")
    p.add_argument("--forms", default="names,nodes", help="names,nodes")
    p.add_argument(
        "--policies",
        type=int,
        default=1,
        metavar="N",
        help="N named policies p1..pN, the measured pod naming pN (default 1: no names)",
    )
    args = p.parse_args(argv)
    if args.policies < 1:
        p.error("--policies: at least 1")
    budget = QUICK if args.quick else FULL
    default = [100] if args.quick else [100, 1000, 5000]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else default
    forms = [f for f in args.forms.split(",") if f]
    if set(forms) - set(FORMS):
        p.error(f"--forms: choose from {', '.join(FORMS)}")
    if not have_wrk():
        print("wrk not found: requests/s columns are skipped", file=sys.stderr)

    started = time.monotonic()
    print(f"machine: {os.cpu_count()} cpus, {cpu_model()}; python {sys.version.split()[0]}")
    if args.policies == 1:
        print("policies: 1 (top-level metrics, the pod names none)")
    else:
        print(
            f"policies: {args.policies} ({policy_name(1)}..{policy_name(args.policies)}, "
            f"default {policy_name(1)}; the pod names {policy_name(args.policies)})"
        )
    print(format_header(), flush=True)
    data = run(sizes, forms, budget, lambda line: print(line, flush=True), args.policies)
    data["machine"] = {"nproc": os.cpu_count(), "cpu": cpu_model()}
    data["seconds"] = round(time.monotonic() - started, 1)
    rss = data["rss_mb"]
    print(
        f"\nRSS at {rss['nodes']} nodes: idle {rss['idle']} MB, warm {rss.get('warm')} MB, "
        f"{rss.get('requests_since_warm')} requests later {rss.get('after')} MB "
        f"(after every form: {rss.get('after_all_forms')} MB)"
    )
    for line in target_lines(data["results"]):
        print(line)
    print(f"total {data['seconds']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
