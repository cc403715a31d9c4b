"""Filter and prioritize latency while binds are in flight, bind on against bind off.

    python -m tests.benchmarks.bindload [--quick] [--rounds N] [--json FILE] [--root DIR]

kube-scheduler binds in a goroutine of its own: while pod N is bound, pod N+1 is already
being filtered and scored. This plays that against the real service (`python -m extender
serve`, the static policy of tests/benchmarks/burst.py: herd guard on, Events off) and a
tests.harness.kubeapi.FakeKubeAPI in this process:

- the scheduling thread, on one keep-alive connection: filter (every node, NodeNames),
  prioritize (the nodes that passed), the highest score (`select_host`, seeded), then the
  pod goes to the binders' queue and the next pod starts at once;
- four binder threads, a connection each: bind on, POST /bind to the service (which
  POSTs the Binding to the API server); bind off (the scheduler's default binder), the
  thread POSTs the same Binding to the API server itself, and the service learns of the
  pod from its pod watch, as it does in a cluster. Either way the API server does the
  same work on the same 2 cores: only the hop through us differs.

For a 1,000-pod burst on 1,000 and 5,000 nodes it records every filter and prioritize
call's server time (`Server-Timing`) and round trip, and prints p50 / p99 per case, the
cases interleaved (1,000 on, 1,000 off, 5,000 on, 5,000 off, then again) for `--rounds`
rounds (default 3), and the medians of the rounds with the ratio bind on / bind off.

Prints numbers, asserts nothing (tests/benchmarks/test_burst_quick.py runs `--quick`).
Every loop is bounded in count and time; the full run takes about ten minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.benchmarks.bench import HOST, ROOT, cpu_model, node_names, pct
from tests.benchmarks.burst import (
    HEADERS,
    NAMESPACE,
    PHASE_SECONDS,
    SEED,
    TOKEN,
    add_pods,
    binding,
    bounded,
    burst_policy,
    fake_api,
    filter_args,
    root_commit,
    service,
)
from tests.harness.kubeapi import FakeKubeAPI, _Handler
from tests.harness.loopback import free_port
from tests.harness.scheduler import select_host

JSON = dict[str, Any]
BINDERS = 4
VERBS = ("filter", "prioritize")
STATS = ("server_p50", "server_p99", "rtt_p50", "rtt_p99")


@dataclass(frozen=True)
class Sizes:
    node_counts: tuple[int, ...]
    pods: int
    best: int


FULL = Sizes(node_counts=(1000, 5000), pods=1000, best=10)
QUICK = Sizes(node_counts=(50,), pods=60, best=5)


@dataclass
class Timings:
    """Per verb: server ms (Server-Timing) and round-trip ms of every call."""

    server: dict[str, list[float]] = field(default_factory=lambda: {v: [] for v in VERBS})
    rtt: dict[str, list[float]] = field(default_factory=lambda: {v: [] for v in VERBS})


class Connection:
    """One keep-alive connection; `post` returns the answer and the Server-Timing ms."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)

    def post(self, path: str, body: Any) -> tuple[Any, float, float]:
        started = time.perf_counter()
        self.conn.request("POST", path, orjson.dumps(body), HEADERS)
        resp = self.conn.getresponse()
        data = resp.read()
        rtt = (time.perf_counter() - started) * 1000
        if resp.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {resp.status}: {data[:300]!r}")
        timing = resp.getheader("Server-Timing") or "dur=nan"
        return orjson.loads(data), float(timing.split("dur=", 1)[1].split(",", 1)[0]), rtt

    def close(self) -> None:
        self.conn.close()


class Binders:
    """BINDERS threads taking (pod, node) from a queue: POST /bind, or the default binder."""

    def __init__(self, port: int, api: FakeKubeAPI, our_bind: bool) -> None:
        self.jobs: queue.Queue[tuple[JSON, str] | None] = queue.Queue()
        self.errors = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(port, api, our_bind), daemon=True)
            for _ in range(BINDERS)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self, port: int, api: FakeKubeAPI, our_bind: bool) -> None:
        api_port = int(api.url.rsplit(":", 1)[1])
        with (
            contextlib.closing(Connection(port)) as conn,
            contextlib.closing(http.client.HTTPConnection(HOST, api_port, timeout=30)) as kube,
        ):
            while (job := self.jobs.get()) is not None:
                pod, node = job
                if our_bind:
                    answer, _, _ = conn.post("/bind", binding(pod, node))
                    failed = answer != {"Error": ""}
                else:
                    failed = not default_bind(kube, pod, node)
                if failed:
                    with self._lock:
                        self.errors += 1

    def finish(self, seconds: float) -> None:
        for _ in self._threads:
            self.jobs.put(None)
        deadline = time.monotonic() + seconds
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise RuntimeError(f"binders not done after {seconds:.0f} s")


def default_bind(kube: http.client.HTTPConnection, pod: JSON, node: str) -> bool:
    """kube-scheduler's default binder: POST the pod's Binding (UID precondition)."""
    meta = pod["metadata"]
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
    kube.request("POST", path, orjson.dumps(body), headers)
    resp = kube.getresponse()
    resp.read()
    return resp.status == 201


def burst(root: Path, work: Path, nodes: int, sizes: Sizes, our_bind: bool) -> JSON:
    """One burst: every filter and prioritize timed while the binders work behind it."""
    names = node_names(nodes)
    best = names[:: nodes // sizes.best][: sizes.best]
    rng = random.Random(SEED)
    port = free_port()
    config = burst_policy(names, best, port, our_bind, None)
    timings = Timings()
    chosen: dict[str, str] = {}
    with fake_api(names) as api:
        pods = add_pods(api, "burst", sizes.pods)
        with service(root, work, config, api), contextlib.closing(Connection(port)) as conn:
            binders = Binders(port, api, our_bind)
            started = time.perf_counter()
            try:
                for pod in bounded(pods, "burst"):
                    passed, server, rtt = conn.post("/filter", filter_args(pod, names))
                    timings.server["filter"].append(server)
                    timings.rtt["filter"].append(rtt)
                    if not passed["NodeNames"]:
                        continue
                    hosts = passed["NodeNames"]
                    answer, server, rtt = conn.post("/prioritize", filter_args(pod, hosts))
                    timings.server["prioritize"].append(server)
                    timings.rtt["prioritize"].append(rtt)
                    node = select_host(hosts, {h["Host"]: h["Score"] for h in answer}, rng)
                    chosen[pod["metadata"]["name"]] = node
                    binders.jobs.put((pod, node))
            finally:
                binders.finish(PHASE_SECONDS)
            wall = time.perf_counter() - started
        misplaced = sum(
            (api.pod(NAMESPACE, name) or {}).get("spec", {}).get("nodeName") != node
            or (our_bind and api.bind_count(NAMESPACE, name) != 1)
            for name, node in chosen.items()
        )
    row: JSON = {
        "nodes": nodes,
        "bind": "on" if our_bind else "off",
        "pods": len(pods),
        "placed": len(chosen),
        "wall_s": round(wall, 2),
        "bind_errors": binders.errors,
        "misplaced": misplaced,
    }
    for verb in VERBS:
        for kind, values in (("server", timings.server[verb]), ("rtt", timings.rtt[verb])):
            row[f"{verb}_{kind}_p50"] = round(pct(values, 50), 3)
            row[f"{verb}_{kind}_p99"] = round(pct(values, 99), 3)
    return row


def medians(rows: Sequence[JSON]) -> list[JSON]:
    """Per (nodes, bind): the median of the rounds of every figure; then on / off."""
    out: list[JSON] = []
    keys = [f"{verb}_{stat}" for verb in VERBS for stat in STATS]
    for nodes in sorted({r["nodes"] for r in rows}):
        per: dict[str, JSON] = {}
        for bind in ("on", "off"):
            mine = [r for r in rows if r["nodes"] == nodes and r["bind"] == bind]
            per[bind] = {"nodes": nodes, "bind": bind, "rounds": len(mine)}
            per[bind].update({k: round(statistics.median(r[k] for r in mine), 3) for k in keys})
            out.append(per[bind])
        ratio: JSON = {"nodes": nodes, "bind": "on/off", "rounds": per["on"]["rounds"]}
        ratio.update({k: round(per["on"][k] / per["off"][k], 2) for k in keys})
        out.append(ratio)
    return out


def table(rows: Sequence[JSON]) -> list[str]:
    columns = ["nodes", "bind"] + [f"{verb}_{stat}" for verb in VERBS for stat in STATS]
    titles = ["nodes", "bind"] + [
        f"{verb[:4]} {stat.replace('_', ' ')}" for verb in VERBS for stat in STATS
    ]
    cells = [titles] + [[str(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bindload", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="50 nodes, 60 pods, one round")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3, --quick 1)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--root", type=Path, default=ROOT, help="run the service code from DIR")
    args = p.parse_args(argv)
    root = args.root.resolve()
    sizes = QUICK if args.quick else FULL
    rounds = args.rounds or (1 if args.quick else 3)
    _Handler.disable_nagle_algorithm = True  # as kube-apiserver answers (see burst.py)
    print(f"machine: {os.cpu_count()} cpus, {cpu_model()}; service from {root}", flush=True)
    started = time.monotonic()
    rows: list[JSON] = []
    with tempfile.TemporaryDirectory(prefix="decice-bindload-") as tmp:
        for round_ in range(1, rounds + 1):
            for nodes in sizes.node_counts:
                for our_bind in (True, False):
                    print(f"-- round {round_}: {nodes} nodes, bind {our_bind}", file=sys.stderr)
                    row = burst(root, Path(tmp), nodes, sizes, our_bind)
                    row["round"] = round_
                    rows.append(row)
                    if row["bind_errors"] or row["misplaced"]:
                        print(f"!! {row}", file=sys.stderr)
    summary = medians(rows)
    print("\n".join(["per round:", *table(rows), "", f"medians of {rounds}:", *table(summary)]))
    for r in summary:
        if r["bind"] == "on/off":
            print(
                f"{r['nodes']} nodes, bind on / off, p99: filter server "
                f"{r['filter_server_p99']}x rtt {r['filter_rtt_p99']}x, prioritize server "
                f"{r['prioritize_server_p99']}x rtt {r['prioritize_rtt_p99']}x"
            )
    seconds = round(time.monotonic() - started, 1)
    print(f"total {seconds} s")
    if args.json:
        data: JSON = {"root": str(root), "root_commit": root_commit(root), "rounds": rows}
        data.update(medians=summary, seconds=seconds, quick=args.quick)
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
