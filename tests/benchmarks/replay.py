"""`decice-extender replay` on a week of a 500-node, 20,000-pod history (issue 37).

    python -m tests.benchmarks.replay [--quick] [--nodes 500] [--pods 20000] [--days 7]
        [--step 30] [--jobs 2] [--json FILE]

A seeded week (`Week`) is served by a fake of the Prometheus query API on 127.0.0.1, in
its own process: it answers the replay's queries (kube-state-metrics' series per window,
node CPU and pods' use per step) by computing them from the week, as a server holding that
history would. The replay runs as the command does (`python -m extender replay`, its own
process), so the figure is the whole command: range queries in chunks, parsing, the
reconstruction, and the six rows (what happened, kube-scheduler, ours, the three peers),
`--jobs` at once. Printed: the wall time, the command's own split (fetch, replay) and peak
memory (its own and its largest worker's).

What the fake does not cost like a real server: it computes answers instead of reading
blocks (its CPU is the parent process', reported apart); a real Prometheus spends its own
time on a week of range queries, which belongs to the server, not the replay.

The week: nodes of 8, 16 or 32 cores (50/35/15 %) with unseen work at 10-35 % of their
cores (5 % of them at 55-75 %), swinging 8 points over a day; one node-exporter
DaemonSet pod per node; 30 % of the other pods running since before the week (a fifth of
them deleted during it), the rest created through the week (a day-shaped Poisson stream)
and living a lognormal time (median 3 h, sigma 1.2, 5 min .. 4 days); 400 Deployments in
20 namespaces, each with a request (100m .. 2 cores) and a use factor (lognormal, median
0.6, sigma 0.7), each pod's use swinging 15 % over a day; placed when created on the
least-requested of three nodes drawn at random that fit it.

It prints numbers and judges none but against the issue's target (under 5 minutes on 2
cores). Every loop is bounded; the server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import resource
import subprocess
import sys
import time
import urllib.parse
from array import array
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import orjson

from tests.harness.loopback import LoopbackServer, wait_until

STEP = 30
DAY = 86400.0
GIB = 2**30
TARGET = 300.0


@dataclass
class Pod:
    namespace: str
    name: str
    node: str
    created: float
    end: float | None
    cpu: float
    use: float
    phase: float
    deployment: str
    kind: str = "deployment"


@dataclass
class Week:
    start: float
    """--from."""
    end: float
    nodes: dict[str, tuple[int, array[float]]] = field(default_factory=dict)
    """node -> (cores, utilisation per step from `start`)."""
    pods: list[Pod] = field(default_factory=list)

    def use(self, pod: Pod, t: float) -> float:
        return pod.use * (1 + 0.15 * math.sin(2 * math.pi * (t - self.start) / DAY + pod.phase))

    def running(self, pod: Pod, t: float) -> bool:
        return pod.created <= t and (pod.end is None or t < pod.end)

    def alive(self, pod: Pod, t0: float, t1: float) -> bool:
        """Alive at some time of (t0, t1]."""
        return pod.created <= t1 and (pod.end is None or pod.end > t0)


def build(nodes: int, pods: int, days: float, seed: int = 1) -> Week:
    rng = random.Random(f"replay-week:{seed}")
    start = math.floor(time.time() / DAY) * DAY - (days + 1) * DAY
    week = Week(start, start + days * DAY)
    steps = int(days * DAY / STEP) + 1
    levels: dict[str, tuple[int, float, float]] = {}
    for i in range(nodes):
        cores = rng.choices((8, 16, 32), (0.5, 0.35, 0.15))[0]
        busy = rng.random() < 0.05
        level = rng.uniform(0.55, 0.75) if busy else rng.uniform(0.10, 0.35)
        levels[f"node-{i:03d}"] = (cores, level, rng.uniform(0, 2 * math.pi))
    deployments = [
        (f"ns-{i % 20:02d}", f"app-{i:03d}", rng.choice((0.1, 0.25, 0.5, 1.0, 2.0)),
         rng.lognormvariate(math.log(0.6), 0.7))
        for i in range(400)
    ]  # fmt: skip
    requested = {name: 0.0 for name in levels}
    names = list(levels)
    for name in names:  # node-exporter, one a node
        week.pods.append(Pod("monitoring", f"node-exporter-{name}", name, start - 30 * DAY,
                             None, 0.1, 0.02, 0.0, "node-exporter", "daemonset"))  # fmt: skip
        requested[name] += 0.1
    others = pods - nodes
    early = int(0.3 * others)
    born = sorted([start - rng.uniform(0, 30 * DAY) for _ in range(early)])
    rate = (others - early) / (days * DAY)
    t = start
    while len(born) < others:
        t += rng.expovariate(rate * (1 + 0.5 * math.sin(2 * math.pi * (t - start) / DAY)) + 1e-9)
        if t >= week.end:
            t = start + rng.uniform(0, days * DAY)
        born.append(t)
    born.sort()
    running: list[Pod] = []
    for i, created in enumerate(born):
        namespace, app, cpu, factor = rng.choice(deployments)
        if created < start:
            end = start + rng.uniform(0, days * DAY) if rng.random() < 0.2 else None
        else:
            life = min(4 * DAY, max(300.0, rng.lognormvariate(math.log(3 * 3600), 1.2)))
            end = created + life if created + life < week.end else None
        for gone in [p for p in running if p.end is not None and p.end <= created]:
            running.remove(gone)
            requested[gone.node] -= gone.cpu
        sample = rng.sample(names, 3)
        node = min(sample, key=lambda n: requested[n] / levels[n][0])
        pod = Pod(namespace, f"{app}-{i:05d}", node, created, end, cpu, cpu * factor,
                  rng.uniform(0, 2 * math.pi), app)  # fmt: skip
        requested[node] += cpu
        running.append(pod)
        week.pods.append(pod)
    for name, (cores, level, phase) in levels.items():
        load = array("d", bytes(8 * steps))
        for k in range(steps):
            load[k] = (level + 0.08 * math.sin(2 * math.pi * k * STEP / DAY + phase)) * cores
        week.nodes[name] = (cores, load)
    for pod in week.pods:
        load = week.nodes[pod.node][1]
        first = max(0, math.ceil((pod.created - start) / STEP))
        last = steps if pod.end is None else min(steps, math.ceil((pod.end - start) / STEP))
        for k in range(first, last):
            load[k] += week.use(pod, start + k * STEP)
    for cores, load in week.nodes.values():
        for k in range(steps):
            load[k] = min(1.0, load[k] / cores)
    return week


# --- the fake server -----------------------------------------------------------------------

_CREATED_FROM = re.compile(r">= (\d+)")


def _times(params: dict[str, str]) -> list[float]:
    start, end = float(params["start"]), float(params["end"])
    step = float(params["step"].rstrip("s"))
    return [start + i * step for i in range(round((end - start) / step) + 1)]


def _series(labels: dict[str, str], points: list[tuple[float, float]]) -> dict[str, Any]:
    return {"metric": labels, "values": [[t, f"{v:.6g}"] for t, v in points]}


def answer(week: Week, query: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """The matrix a server holding `week` answers to one of the replay's queries."""
    times = _times(params)
    step = float(params["step"].rstrip("s"))
    if query.startswith("count(kube_node_status_allocatable"):
        return [_series({}, [(t, len(week.nodes)) for t in times])]
    if query.startswith("count(kube_pod_info"):
        alive = sum(1 for p in week.pods if p.end is None or p.end > week.start)
        return [_series({}, [(t, alive) for t in times])]
    if query.startswith("count("):
        return [_series({}, [(t, 1) for t in times])]
    if "kube_node_status_allocatable" in query:
        out = []
        for name, (cores, _) in week.nodes.items():
            for resource_, value in (("cpu", cores), ("memory", cores * 4 * GIB), ("pods", 110)):
                out.append(
                    _series({"node": name, "resource": resource_}, [(t, value) for t in times])
                )
        return out
    if "sum by (namespace, pod) (node_namespace_pod_container" in query:
        match = _CREATED_FROM.search(query)
        since = float(match.group(1)) if match else week.start
        return [
            _series(
                {"namespace": p.namespace, "pod": p.name},
                [(t, week.use(p, t)) for t in times if week.running(p, t)],
            )
            for p in week.pods
            if p.created >= since and week.alive(p, times[0], times[-1])
        ]
    if step == STEP:  # the policy's CPU query
        first = round((times[0] - week.start) / STEP)
        return [
            _series({"node": name}, [(t, load[first + i]) for i, t in enumerate(times)
                                     if 0 <= first + i < len(load)])
            for name, (_, load) in week.nodes.items()
        ]  # fmt: skip
    return _windows(week, query, times, step)


def _scrapes(pod: Pod, t0: float, t1: float) -> float:
    """Scrapes of (t0, t1] that saw the pod (at least the one its window says it was in)."""
    alive = min(t1, pod.end if pod.end is not None else t1) - max(t0, pod.created)
    return float(max(1, round(alive / STEP)))


def _windows(week: Week, query: str, times: list[float], window: float) -> list[dict[str, Any]]:
    out = []
    for p in week.pods:
        seen = [t for t in times if week.alive(p, t - window, t)]
        if not seen:
            continue
        pod = {"namespace": p.namespace, "pod": p.name, "uid": f"uid-{p.name}"}
        if "kube_pod_info" in query:  # its samples per window (count_over_time)
            kind = "DaemonSet" if p.kind == "daemonset" else "ReplicaSet"
            counts = [(t, _scrapes(p, t - window, t)) for t in seen]
            out.append(_series({**pod, "node": p.node, "created_by_kind": kind}, counts))
        elif any(n in query for n in ("kube_pod_created", "kube_pod_start_time", "scheduled_time")):
            out.append(_series(pod, [(t, p.created) for t in seen]))
        elif "kube_pod_deletion_timestamp" in query and p.end is not None:
            out.append(_series(pod, [(t, p.end) for t in seen if t - window < p.end <= t]))
        elif "kube_pod_container_resource_requests" in query:
            for resource_, value in (("cpu", p.cpu), ("memory", p.cpu * GIB)):
                out.append(_series({**pod, "resource": resource_}, [(t, value) for t in seen]))
        elif "kube_pod_owner" in query:
            labels = {**pod, "workload": p.deployment, "workload_type": p.kind}
            out.append(_series(labels, [(t, 1) for t in seen]))
        elif "kube_pod_scheduler" in query:
            out.append(_series({**pod, "name": "default-scheduler"}, [(t, 1) for t in seen]))
    return out


def serve(nodes: int, pods: int, days: float, ready: Any, port: Any) -> None:
    """The fake server's process: build the week, serve until terminated."""
    week = build(nodes, pods, days)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/api/v1/query_range":
                data = {"resultType": "matrix", "result": answer(week, params["query"], params)}
            elif url.path == "/api/v1/query":
                data = {"resultType": "vector", "result": [{"metric": {}, "value": [0, "1"]}]}
            elif url.path == "/api/v1/status/runtimeinfo":
                data = {"storageRetention": "15d"}
            else:
                self.send_error(404)
                return
            body = orjson.dumps({"status": "success", "data": data})
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = LoopbackServer(Handler, name="replay-week")
    port.value = server.port
    ready.set()
    while True:
        time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 nodes, 400 pods, 1 day")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--step", type=int, default=STEP)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.pods, args.days = 20, 400, 1.0
    context = multiprocessing.get_context("fork")
    ready, port = context.Event(), context.Value("i", 0)
    began = time.perf_counter()
    server = context.Process(target=serve, args=(args.nodes, args.pods, args.days, ready, port))
    server.start()
    try:
        wait_until(ready.is_set, 600, "the fake server built its week and listens")
        built = time.perf_counter() - began
        start = math.floor(time.time() / DAY) * DAY - (args.days + 1) * DAY
        command = [
            sys.executable, "-m", "extender", "replay",
            "--prometheus", f"http://127.0.0.1:{port.value}",
            "--from", str(start), "--to", str(start + args.days * DAY),
            "--step", f"{args.step}s", "--jobs", str(args.jobs), "--max-memory", "16GiB",
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finally:
        server.terminate()
        server.join(10)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    split = re.search(
        r"fetched in ([0-9.]+) s, replayed in ([0-9.]+) s.*peak memory (\d+) MiB "
        r"\(estimated (\d+) MiB\)(?:, (\d+) MiB in the largest worker)?",
        done.stderr,
    )
    assert split is not None, done.stderr[-2000:]
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    figures = {
        "nodes": args.nodes,
        "pods": args.pods,
        "days": args.days,
        "step": args.step,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "seconds": round(wall, 1),
        # The command's processes' CPU time, its workers' included: what a busy machine's
        # wall time hides.
        "cpu_seconds": round(cpu, 1),
        "fetch_seconds": float(split.group(1)),
        "replay_seconds": float(split.group(2)),
        "peak_mib": int(split.group(3)),
        "estimated_mib": int(split.group(4)),
        "worker_peak_mib": int(split.group(5)) if split.group(5) else None,
        "largest_process_mib": peak_children,
        "week_built_seconds": round(built, 1),
        "row_cpu_seconds": dict(
            (name, float(seconds))
            for name, seconds in re.findall(
                r"([\w-]+) ([0-9.]+)", done.stderr.split("per row: ")[-1]
            )
        ),
    }
    print(done.stdout)
    print(
        f"replay of {args.days:g} days, {args.nodes} nodes, {args.pods} pods at step "
        f"{args.step}s, {args.jobs} jobs on {os.cpu_count()} cpus: {wall:.1f} s, "
        f"{cpu:.1f} cpu-seconds "
        f"(fetch {figures['fetch_seconds']} s, replay {figures['replay_seconds']} s); peak "
        f"memory {figures['peak_mib']} MiB (estimated {figures['estimated_mib']} MiB)"
        + (
            f", largest worker {figures['worker_peak_mib']} MiB"
            if figures["worker_peak_mib"]
            else ""
        )
        + f"; target under {TARGET:.0f} s: {'met' if wall < TARGET else 'MISSED'}"
    )
    print(
        "cpu seconds per row: "
        + ", ".join(f"{n} {s:g}" for n, s in figures["row_cpu_seconds"].items())
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
