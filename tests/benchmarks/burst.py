"""Service CPU per bind, and where a burst of pods lands (herd guard), against the fake API.

    python -m tests.benchmarks.burst [--quick] [--json FILE] [--root DIR]

Starts the real service (`python -m extender serve`, static policy, Events off) from the
checkout DIR (default: this one), with KUBECONFIG pointing at a tests.harness.kubeapi.FakeKubeAPI
that runs in this process, so the fake's CPU is not counted as the service's.

1. bind: pods filtered with 3 candidate nodes each, then bound one by one: the service's
   CPU (utime + stime) over the bind phase only, per bind, at concurrency 1 (one keep-alive
   connection, like the scheduler's binder) and 4 (threads, a connection each).
2. burst, our bind: pods against all nodes through filter -> prioritize -> the node
   kube-scheduler would pick (highest score, ties at random, fixed seed) -> POST /bind.
   A few nodes are clearly the best: without the herd guard they take the whole burst.
3. burst, default binder: as 2 with bind disabled; the benchmark binds through the fake
   (`FakeKubeAPI.assign`) as the scheduler's default binder would, so the service can only
   learn of the pod from its pod watch.
2 and 3 also run with `prioritize.maxHosts: 10`.
4. cycles: case 2 at 5,000 nodes (1,000 pods): the service's CPU seconds (process CPU, not
   wall time) per 1,000 filter -> prioritize -> bind cycles, the whole extender's cost per
   pod on a big cluster.

Prints numbers, asserts nothing (tests/benchmarks/test_burst_quick.py runs `--quick`). Every loop is
bounded in count and in time; a full run takes about a minute or two on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from tests.benchmarks.bench import HOST, ROOT, cpu_model, node_names, pct, running
from tests.benchmarks.bench import policy as bench_policy
from tests.harness.kubeapi import FakeKubeAPI, _Handler, write_kubeconfig
from tests.harness.loopback import free_port
from tests.harness.scheduler import select_host

T = TypeVar("T")
JSON = dict[str, Any]
Log = Callable[[str], None]

TOKEN = "burst-benchmark-token"
NAMESPACE = "decice"
SCHEDULER = "decice_sched"
POD_CPU = "500m"
NODE_CPU = "4"  # allocatable cores in the fake, so the service knows every node's size
PHASE_SECONDS = 600.0  # ceiling of one loop: a stuck service fails the run, never hangs it
SEED = 42
HEADERS = {"Content-Type": "application/json"}

BIND_KEYS = (
    "concurrency",
    "nodes",
    "binds",
    "cpu_s",
    "cpu_per_bind_us",
    "binds_per_s",
    "rtt_p50_ms",
    "rtt_p99_ms",
    "bind_errors",
    "bind_count_mismatches",
)
BURST_KEYS = (
    "case",
    "binder",
    "max_hosts",
    "nodes",
    "pods",
    "placed",
    "unplaced",
    "max_pods_per_node",
    "nodes_used",
    "pods_per_node_p50",  # over the nodes used
    "pods_per_node_p99",
    "best_nodes",
    "pods_on_best_nodes",
    "wall_s",
    "cpu_s",
    "cpu_per_pod_us",
    "bind_errors",
    "placement_mismatches",
)
CYCLE_KEYS = (*BURST_KEYS, "cpu_s_per_1000_cycles")


@dataclass(frozen=True)
class Sizes:
    nodes: int
    binds: int
    burst_pods: int
    best: int
    cycle_nodes: int
    cycles: int
    candidates: int = 3


FULL = Sizes(nodes=1000, binds=2000, burst_pods=1000, best=10, cycle_nodes=5000, cycles=1000)
QUICK = Sizes(nodes=50, binds=200, burst_pods=100, best=5, cycle_nodes=200, cycles=50)


# -- plumbing ------------------------------------------------------------------------------


def bounded(items: Iterable[T], what: str, seconds: float = PHASE_SECONDS) -> Iterator[T]:
    """The items, failing the run once they take longer than `seconds`."""
    deadline = time.monotonic() + seconds
    for item in items:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done after {seconds:.0f} s")
        yield item


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (every thread), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_with_children(pid: int) -> float:
    """utime + stime of `pid` and every live descendant, seconds (/proc): a service with a
    metrics fetch process (metrics.fetch_subprocess) counts that process too."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            total += cpu_seconds(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
    return total


class Client:
    """One keep-alive connection to the service; JSON in, JSON out, non-200 raises."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)

    def post(self, path: str, body: Any) -> Any:
        self.conn.request("POST", path, orjson.dumps(body), HEADERS)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {data[:300]!r}")
        return orjson.loads(data)

    def close(self) -> None:
        self.conn.close()


@contextlib.contextmanager
def service(root: Path, work: Path, config: JSON, api: FakeKubeAPI) -> Iterator[int]:
    """The service from `root`, talking to `api`; yields its pid."""
    port = config["server"]["port"]
    policy_file = work / f"policy-{port}.yaml"
    policy_file.write_bytes(orjson.dumps(config))  # JSON is YAML
    kubeconfig = write_kubeconfig(work / f"kubeconfig-{port}", api.url, TOKEN)
    # bench.running starts processes in this checkout; `env -C` runs the service from
    # `root` instead (cwd and PYTHONPATH), and execs it, so the pid stays the service's.
    argv = ["env", "-C", str(root), f"KUBECONFIG={kubeconfig}", f"PYTHONPATH={root}"]
    argv += [sys.executable, "-m", "extender", "serve", "--config", str(policy_file)]
    with running([*argv, "--log-level", "warning"], port, "/readyz") as proc:
        yield proc.pid


def fake_api(names: Sequence[str]) -> FakeKubeAPI:
    api = FakeKubeAPI(token=TOKEN)
    for i, name in enumerate(names):  # the IP that node_names() spells out
        api.add_node(name, f"10.{i // 62500}.{i // 250 % 250}.{i % 250 + 1}", cpu=NODE_CPU)
    return api


def add_pods(api: FakeKubeAPI, prefix: str, count: int) -> list[JSON]:
    return [
        api.add_pod(
            NAMESPACE,
            f"{prefix}-{i:05d}",
            str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{prefix}-{i}")),
            scheduler_name=SCHEDULER,
            cpu_request=POD_CPU,
        )
        for i in range(count)
    ]


def binding(pod: JSON, node: str) -> JSON:
    meta = pod["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node,
    }


def filter_args(pod: JSON, names: Sequence[str]) -> JSON:
    return {"Pod": pod, "Nodes": None, "NodeNames": list(names)}


# -- case 1: CPU per bind -------------------------------------------------------------------


def bind_all(port: int, bindings: Sequence[JSON], concurrency: int) -> tuple[list[float], int]:
    """POST every binding, `concurrency` threads with a connection each: (rtt ms, errors)."""

    def worker(part: Sequence[JSON]) -> tuple[list[float], int]:
        rtt: list[float] = []
        errors = 0
        with contextlib.closing(Client(port)) as client:
            for args in bounded(part, "binds"):
                t0 = time.perf_counter()
                answer = client.post("/bind", args)
                rtt.append((time.perf_counter() - t0) * 1000)
                errors += answer != {"Error": ""}
        return rtt, errors

    parts = [bindings[i::concurrency] for i in range(concurrency)]
    with ThreadPoolExecutor(concurrency) as pool:
        done = list(pool.map(worker, parts))
    return [ms for rtt, _ in done for ms in rtt], sum(errors for _, errors in done)


def bind_case(root: Path, work: Path, sizes: Sizes, concurrency: int, log: Log) -> JSON:
    names = node_names(sizes.nodes)
    rng = random.Random(SEED)
    port = free_port()
    config = bench_policy(names, port)
    config.update(bind={"enabled": True}, explain={"events": False})
    with fake_api(names) as api:
        pods = add_pods(api, f"bind-c{concurrency}", sizes.binds)
        with service(root, work, config, api) as pid:
            bindings = []
            with contextlib.closing(Client(port)) as client:
                for pod in bounded(pods, "filters"):
                    picked = rng.sample(names, sizes.candidates)
                    passed = client.post("/filter", filter_args(pod, picked))["NodeNames"]
                    if not passed:
                        raise RuntimeError(f"filter passed none of {picked}")
                    bindings.append(binding(pod, passed[0]))
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            rtt, errors = bind_all(port, bindings, concurrency)
            wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
        mismatches = sum(api.bind_count(NAMESPACE, p["metadata"]["name"]) != 1 for p in pods)
    if errors or mismatches:
        log(f"!! bind c{concurrency}: {errors} Errors, {mismatches} pods not bound once")
    return {
        "concurrency": concurrency,
        "nodes": sizes.nodes,
        "binds": len(rtt),
        "cpu_s": round(cpu, 3),
        "cpu_per_bind_us": round(cpu / len(rtt) * 1e6, 1),
        "binds_per_s": round(len(rtt) / wall, 1),
        "rtt_p50_ms": round(pct(rtt, 50), 3),
        "rtt_p99_ms": round(pct(rtt, 99), 3),
        "bind_errors": errors,
        "bind_count_mismatches": mismatches,
    }


# -- cases 2 and 3: burst placement ---------------------------------------------------------


def burst_policy(
    names: Sequence[str], best: Sequence[str], port: int, bind: bool, max_hosts: int | None
) -> JSON:
    """cpu (weight 2, filtered above 0.9) and memory: `best` score 10, every other node <= 6.

    A pod (0.5 of 4 cores) adds 0.125 cpu on its node, so with the herd guard a best node
    drops to the others' scores after about 4 pods and is filtered after 7."""
    rng = random.Random(SEED)
    nodes = {
        n: {"cpu": round(rng.uniform(0.4, 0.85), 4), "memory": round(rng.uniform(0.3, 0.9), 4)}
        for n in names
    }
    nodes.update({n: {"cpu": 0.02, "memory": 0.1} for n in best})
    config: JSON = {
        "schedulerNames": [SCHEDULER],
        "server": {"host": HOST, "port": port},
        "provider": "static",
        "static": {"nodes": nodes},
        "metrics": [
            {"name": "cpu", "weight": 2, "direction": "lower", "filter": {"above": 0.9}},
            {"name": "memory", "weight": 1, "direction": "lower"},
        ],
        # The static values never include the burst: keep reservations for the whole run.
        "herdGuard": {"enabled": True, "metric": "cpu", "settle": 3600},
        "bind": {"enabled": bind},
        "explain": {"events": False},
    }
    if max_hosts is not None:
        config["prioritize"] = {"maxHosts": max_hosts}
    return config


def burst_case(
    root: Path,
    work: Path,
    sizes: Sizes,
    our_bind: bool,
    max_hosts: int | None,
    log: Log,
    case: str | None = None,
) -> JSON:
    names = node_names(sizes.nodes)
    best = names[:: sizes.nodes // sizes.best][: sizes.best]  # spread, not first in order
    rng = random.Random(SEED)
    port = free_port()
    config = burst_policy(names, best, port, our_bind, max_hosts)
    chosen: dict[str, str] = {}  # pod name -> node
    errors = 0
    with fake_api(names) as api:
        pods = add_pods(api, "burst", sizes.burst_pods)
        with service(root, work, config, api) as pid, contextlib.closing(Client(port)) as client:
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            for pod in bounded(pods, "burst"):
                passed = client.post("/filter", filter_args(pod, names))["NodeNames"]
                if not passed:
                    continue  # unschedulable: the scheduler would retry it later
                answer = client.post("/prioritize", filter_args(pod, passed))
                node = select_host(passed, {h["Host"]: h["Score"] for h in answer}, rng)
                name = pod["metadata"]["name"]
                if our_bind:
                    errors += client.post("/bind", binding(pod, node)) != {"Error": ""}
                else:  # the scheduler's default binder; the service sees it on its watch
                    api.assign(NAMESPACE, name, node)
                chosen[name] = node
            wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
        mismatches = sum(
            (api.pod(NAMESPACE, name) or {}).get("spec", {}).get("nodeName") != node
            or (our_bind and api.bind_count(NAMESPACE, name) != 1)
            for name, node in chosen.items()
        )
    case = case or ("2 our bind" if our_bind else "3 default binder")
    if errors or mismatches:
        log(f"!! burst {case}: {errors} Errors, {mismatches} pods not on their node once")
    per_node = sorted(Counter(chosen.values()).values())
    return {
        "case": case,
        "binder": "extender" if our_bind else "default",
        "max_hosts": max_hosts,
        "nodes": sizes.nodes,
        "pods": len(pods),
        "placed": len(chosen),
        "unplaced": len(pods) - len(chosen),
        "max_pods_per_node": max(per_node, default=0),
        "nodes_used": len(per_node),
        "pods_per_node_p50": pct(per_node, 50) if per_node else 0,
        "pods_per_node_p99": pct(per_node, 99) if per_node else 0,
        "best_nodes": len(best),
        "pods_on_best_nodes": sum(node in best for node in chosen.values()),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 3),
        "cpu_per_pod_us": round(cpu / max(1, len(pods)) * 1e6, 1),
        "bind_errors": errors,
        "placement_mismatches": mismatches,
    }


def cycles_case(root: Path, work: Path, sizes: Sizes, log: Log) -> JSON:
    """Case 4: the service's CPU per 1,000 filter -> prioritize -> bind cycles."""
    big = replace(sizes, nodes=sizes.cycle_nodes, burst_pods=sizes.cycles)
    row = burst_case(root, work, big, True, None, log, case="4 cycles")
    row["cpu_s_per_1000_cycles"] = round(row["cpu_s"] / max(1, row["placed"]) * 1000, 3)
    return row


# -- output --------------------------------------------------------------------------------

BIND_COLUMNS = (
    ("concurrency", "conc"),
    ("binds", "binds"),
    ("cpu_per_bind_us", "cpu us/bind"),
    ("binds_per_s", "binds/s"),
    ("rtt_p50_ms", "rtt p50 ms"),
    ("rtt_p99_ms", "rtt p99 ms"),
    ("bind_errors", "errors"),
    ("bind_count_mismatches", "mismatch"),
)
BURST_COLUMNS = (
    ("case", "case"),
    ("max_hosts", "maxHosts"),
    ("placed", "placed"),
    ("max_pods_per_node", "max/node"),
    ("nodes_used", "nodes used"),
    ("pods_per_node_p50", "p50/node"),
    ("pods_per_node_p99", "p99/node"),
    ("pods_on_best_nodes", "on best"),
    ("wall_s", "wall s"),
    ("cpu_per_pod_us", "cpu us/pod"),
    ("bind_errors", "errors"),
    ("placement_mismatches", "mismatch"),
)

CYCLE_COLUMNS = (
    ("nodes", "nodes"),
    ("placed", "cycles"),
    ("cpu_s", "cpu s"),
    ("cpu_s_per_1000_cycles", "cpu s per 1,000"),
    ("wall_s", "wall s"),
    ("max_pods_per_node", "max/node"),
    ("bind_errors", "errors"),
    ("placement_mismatches", "mismatch"),
)


def table(rows: Sequence[JSON], columns: Sequence[tuple[str, str]]) -> list[str]:
    cells = [[title for _, title in columns]]
    cells += [["-" if r[key] is None else str(r[key]) for key, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]


def summary(data: JSON) -> list[str]:
    """One line per case."""
    lines = [
        f"case 1 bind c{r['concurrency']}: {r['cpu_per_bind_us']:.0f} us service CPU per bind, "
        f"{r['binds_per_s']:.0f} binds/s, rtt p50 {r['rtt_p50_ms']:.2f} ms"
        for r in data["bind"]
    ]
    for r in data["burst"]:
        hosts = "" if r["max_hosts"] is None else f" (maxHosts {r['max_hosts']})"
        lines.append(
            f"case {r['case']}{hosts}: max {r['max_pods_per_node']} pods on one node, "
            f"{r['nodes_used']} nodes used, {r['pods_on_best_nodes']}/{r['placed']} pods "
            f"on the {r['best_nodes']} best nodes"
        )
    for r in data["cycles"]:
        lines.append(
            f"case 4 cycles: {r['cpu_s_per_1000_cycles']:.3f} s service CPU per 1,000 "
            f"filter+prioritize+bind cycles at {r['nodes']} nodes"
        )
    return lines


def root_commit(root: Path) -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="burst", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="50 nodes, 100 pods, 200 binds")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--root", type=Path, default=ROOT, help="run the service code from DIR")
    p.add_argument("--cases", default="1,2,3,4", help="which cases to run (default 1,2,3,4)")
    args = p.parse_args(argv)
    root = args.root.resolve()
    if not (root / "extender" / "__main__.py").is_file():
        p.error(f"--root: no extender package in {root}")
    sizes = QUICK if args.quick else FULL
    # kube-apiserver (Go) answers with TCP_NODELAY; http.server does not, and its separate
    # header and body writes then wait out the client's delayed ACK: 40 ms on every bind.
    _Handler.disable_nagle_algorithm = True
    cases = set(args.cases.split(","))

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    data: JSON = {
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": sys.version.split()[0]},
        "root": str(root),
        "root_commit": root_commit(root),
        "quick": args.quick,
    }
    print(f"machine: {os.cpu_count()} cpus, {cpu_model()}; service from {root}", flush=True)
    with tempfile.TemporaryDirectory(prefix="decice-burst-") as tmp:
        work = Path(tmp)
        data["bind"] = []
        for concurrency in (1, 4) if "1" in cases else ():
            log(f"-- case 1: bind, concurrency {concurrency}")
            data["bind"].append(bind_case(root, work, sizes, concurrency, log))
        data["burst"] = []
        for max_hosts in (None, 10):
            for our_bind in [b for b, c in ((True, "2"), (False, "3")) if c in cases]:
                log(f"-- burst: {'our bind' if our_bind else 'default binder'}, {max_hosts=}")
                data["burst"].append(burst_case(root, work, sizes, our_bind, max_hosts, log))
        data["cycles"] = []
        if "4" in cases:
            log(f"-- case 4: {sizes.cycles} cycles at {sizes.cycle_nodes} nodes")
            data["cycles"].append(cycles_case(root, work, sizes, log))
    data["seconds"] = round(time.monotonic() - started, 1)
    lines = [*table(data["bind"], BIND_COLUMNS), "", *table(data["burst"], BURST_COLUMNS)]
    lines += ["", *table(data["cycles"], CYCLE_COLUMNS)]
    print("\n".join([*lines, "", *summary(data), f"total {data['seconds']} s"]))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
