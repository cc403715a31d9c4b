"""`decice-extender replay` on histories of several shapes nobody tuned on (issue 45).

    python -m tests.benchmarks.replayshapes [--shape NAME] [--seed N] [--seeds K]
        [--tie-breaks T] [--json FILE] [--keep DIR]

For each shape and seed: a cluster's past is drawn from the seed (tests.harness.
clusterhistory: the series node-exporter, kube-state-metrics and cAdvisor export, with
their names and labels), backfilled into a real Prometheus on 127.0.0.1 with promtool and
the stock recording rules recorded over it (tests.harness.backfill), and replayed by the
real command (`python -m extender replay`, the `decice-extender` entry point) with the
shipped policy (config/extender.yaml), once per tie-break seed (the replay's `--seed`,
1..T: where kube-scheduler's scores tie it picks at random, and on a small cluster that
alone moves hot node-minutes by a fifth or more). Printed per shape, per row of the replay
(as it happened, kube-scheduler, ours, the peers): hot node-minutes, pod-wait minutes,
pods that waited (and the longest wait), pods left unplaced and the exceedance rate, each
a mean ± sd over the seeds (each seed's figure its mean over the tie-breaks), the sd the
tie-breaks alone make, and how far the kube-scheduler model is from what happened, as the
replay judges it. `--json` writes every replay's figures and the spreads.

Every pod of a history was placed by requests alone, when it was created: kube-scheduler's
default profile as the simulation models it (tests.replay.cluster.place_like_kube_scheduler),
so the kube-scheduler row is the history's own scheduler. Deployments keep `replicas`
pods: pods running since before the history, each replaced by a new pod of its ReplicaSet
when it dies (exponential lifetimes), scaled up and down at drawn times (as an HPA does),
and some rolled to a new ReplicaSet one pod at a time during the range, so pods of one
workload run before and during it (the workload estimates need siblings). A pod's use is
its Deployment's (its request times a drawn factor) within +-20 %. A deleted pod
terminates for a while, during which kube-state-metrics exports its
kube_pod_deletion_timestamp: 1-5 s for a Deployment whose pods exit on SIGTERM, the
default 30 s grace period for one whose pods wait it out (drawn per Deployment, half and
half): a 30-second scrape catches the first kind rarely, the second always, and the
replay knows when a pod it did not catch ended only to within its window queries' window.

The shapes (every size, level, time and factor is drawn from the seed; the ranges are
the shapes' definitions, fixed before any figure was seen):

- `issue`: the issue's history. 3 hours, 6-10 nodes of 4 or 8 cores; two of them carry
  55-80 % of their cores in work no scheduler sees (the others 10-30 %); 5-8 Deployments,
  three of them using 3-6x what they request (the rest 0.5-1.2x).
- `moving`: the issue's second. 3 hours, 12-20 nodes; the unseen load (55-80 %) on three
  nodes moves to three others 80-100 minutes into the range; 8-12 Deployments
  misrequesting both ways (use 0.25x-4x the request, log-uniform).
- `diurnal`: 8 hours from a drawn hour of the morning, 8-14 nodes of 4, 8, 16 or 32 cores,
  each node's unseen load swinging over the day (base 15-35 %, +-30-60 % of it, its peak
  at a drawn hour), 4-7 Deployments (0.5-1.5x), and 2-4 CronJobs whose Jobs arrive in
  waves (every 30 or 60 minutes, 4-12 pods each, running 5-20 minutes).
- `noisy`: 2 hours, 40-60 nodes of 8 or 16 cores, unseen load 15-35 %; on 3-6 of them it
  spikes to 80-95 % for up to 1-3 minutes (shorter where the mean leaves no room below
  it) every 5-10 minutes on average, at the same mean as before (high variance, same
  mean); a log-agent DaemonSet on every node; pods of another
  scheduler that keep the node it chose; 12-20 Deployments (0.5-2x).

Pods use 35-50 % of what the nodes have left after their unseen load, in every shape.
The figures are the benchmark's (BENCHMARKS.md), never asserted: tests/replay/
test_shapes.py runs one seed end to end and checks what the JSON holds. Every loop is
bounded; the servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from extender.simulation.profiles import SHORT
from extender.simulation.summary import spread
from tests.harness.backfill import backfilled_prometheus
from tests.harness.clusterhistory import GIB, ClusterHistory, Node, Pod, node_exporter_pods
from tests.replay.cluster import place_like_kube_scheduler

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
RULES = ROOT / "tests" / "replay" / "stock-rules.yaml"
STEP = 30
"""Scrape and rule interval, and the replay's step (kube-prometheus-stack's 30 s)."""
WARM = 1200.0
"""History before --from: the 5-minute rates fill, then the replay's 10-minute lead-in."""
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
MOST = 2.0
"""The largest request of a Deployment's pod, in cores (it fits the smallest node)."""
FIGURES = ("node_minutes_hot", "wait_minutes", "waited", "wait_max", "unplaced", "exceedance")
"""The replay's figures kept per row (extender.simulation.stats.Metrics fields)."""


@dataclass
class Shaped:
    """A drawn history and the range to replay."""

    shape: str
    seed: int
    history: ClusterHistory
    start: float
    """--from."""
    end: float
    """--to."""
    draws: list[str] = field(default_factory=list)
    """What the seed drew, in words."""

    @property
    def description(self) -> str:
        return f"{self.shape} seed {self.seed}: " + "; ".join(self.draws)


class Builder:
    """A history under construction: nodes, then workloads, then the placements."""

    def __init__(self, shape: str, seed: int, hours: float, end: float) -> None:
        self.rng = random.Random(f"replayshapes:{shape}:{seed}")
        start = end - hours * HOUR
        self.history = ClusterHistory(start - WARM, end, [], scrape=STEP)
        self.shaped = Shaped(shape, seed, self.history, start, end)
        self.names: set[str] = set()

    @property
    def start(self) -> float:
        return self.shaped.start

    @property
    def end(self) -> float:
        return self.shaped.end

    def draw(self, text: str) -> None:
        self.shaped.draws.append(text)

    def nodes(self, count: int, cores: Callable[[], float]) -> list[str]:
        names = [f"node-{i:02d}" for i in range(1, count + 1)]
        self.history.nodes = [
            Node(n, cores(), f"10.0.{i // 200}.{10 + i % 200}") for i, n in enumerate(names)
        ]
        self.history.pods = node_exporter_pods(self.history)
        return names

    def background(self, name: str, levels: Sequence[tuple[float, float]]) -> None:
        """The node's unseen load: (from time, share of its cores), in time order."""
        nodes = self.history.nodes
        i = next(i for i, n in enumerate(nodes) if n.name == name)
        whole = tuple((float(round(t)), level) for t, level in levels)
        nodes[i] = replace(nodes[i], background=whole)

    def room(self) -> float:
        """Cores the nodes have left after their unseen load, on average over the range."""
        times = [self.start + k * 5 * MINUTE for k in range(int((self.end - self.start) / 300))]
        return sum(
            n.cores - sum(n.unseen(t) for t in times) / len(times) for n in self.history.nodes
        )

    def suffix(self, length: int = 5) -> str:
        while True:
            text = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))
            if text not in self.names:
                self.names.add(text)
                return text

    def pod(
        self, namespace: str, name: str, created: float, cpu: float, use: float, **more: Any
    ) -> Pod:
        pod = Pod(namespace, name, created, cpu, use, memory=GIB // 4, **more)
        self.history.pods.append(pod)
        return pod

    def deployment(
        self,
        namespace: str,
        name: str,
        *,
        replicas: int,
        cpu: float,
        use: float,
        lifetime: float,
        scale: Sequence[tuple[float, int]] = (),
        rollout: float | None = None,
        grace: float = 30.0,
    ) -> None:
        """Its pods over the history: `replicas` running since before it, each replaced
        when it dies (exponential, mean `lifetime` seconds) by a new pod of the current
        ReplicaSet; `scale`: (time, replicas) changes; `rollout`: when a new ReplicaSet
        replaces every pod, one at a time (maxSurge 1, maxUnavailable 0); a deleted pod
        terminates `grace` seconds."""
        rng = self.rng
        replicaset = f"{name}-{self.suffix(9)}"
        live: dict[str, Pod] = {}
        """Its pods not yet deleted, by name."""
        events: list[tuple[float, int, str, int | str]] = []  # (time, order, kind, what)
        order = 0

        def push(t: float, kind: str, payload: int | str) -> None:
            nonlocal order
            order += 1
            heapq.heappush(events, (t, order, kind, payload))

        def create(t: float) -> None:
            pod = self.pod(
                namespace,
                f"{replicaset}-{self.suffix()}",
                t,
                cpu,
                use * rng.uniform(0.8, 1.2),
                owner_kind="ReplicaSet",
                owner_name=replicaset,
                deployment=name,
                grace=grace,
            )
            live[pod.name] = pod
            push(max(t, self.history.start) + rng.expovariate(1 / lifetime), "die", pod.name)

        def delete(pod: Pod, t: float) -> None:
            pod.end = t
            del live[pod.name]

        for _ in range(replicas):
            create(self.history.start - rng.uniform(10 * MINUTE, 2 * DAY))
        for t, n in scale:
            push(t, "scale", n)
        if rollout is not None:
            push(rollout, "rollout", 0)
        while events and events[0][0] < self.end:
            t, _, kind, payload = heapq.heappop(events)
            if kind == "die":
                pod = live.get(str(payload))
                if pod is not None:
                    delete(pod, t)
                    create(t + 1.0)
            elif kind == "scale":
                want = int(payload)
                for k in range(want - len(live)):
                    create(t + 2.0 * k)
                newest = sorted(live.values(), key=lambda p: -p.created)
                for pod in newest[: max(0, len(live) - want)]:
                    delete(pod, t)
            else:
                replicaset = f"{name}-{self.suffix(9)}"
                for k, old in enumerate(list(live.values())):
                    create(t + 20.0 * k)
                    delete(old, t + 20.0 * k + 15.0)

    def cronjob(
        self,
        namespace: str,
        name: str,
        *,
        every: float,
        parallelism: int,
        cpu: float,
        use: float,
        runs: tuple[float, float],
    ) -> int:
        """Jobs in waves every `every` seconds from a drawn offset; returns the waves."""
        rng = self.rng
        t = self.history.start + rng.uniform(0, every)
        waves = 0
        while t < self.end and waves < 1000:
            job = f"{name}-{int(t - self.history.start) // 60}"
            for k in range(parallelism):
                created = t + 0.5 * k
                self.pod(
                    namespace,
                    f"{job}-{self.suffix()}",
                    created,
                    cpu,
                    use * rng.uniform(0.8, 1.2),
                    end=created + 5 + rng.uniform(*runs),
                    completed=True,
                    owner_kind="Job",
                    owner_name=job,
                )
            waves += 1
            t += every
        return waves

    def workloads(self, count: int, factor: Callable[[int], float], share: float) -> None:
        """`count` Deployments of 3-8 replicas (more, up to 16, where a pod would request
        over MOST) whose pods use `share` of the room left
        between them (each a drawn weight of it); Deployment i's pods use `factor(i)`
        times their request. Each is drawn in words."""
        rng = self.rng
        weights = [rng.uniform(0.5, 1.5) for _ in range(count)]
        target = share * self.room()
        rolled = set(rng.sample(range(count), max(1, count // 3)))
        words = []
        for i, weight in enumerate(weights):
            name, replicas, f = f"app-{i + 1}", rng.randint(3, 8), factor(i)
            cores = target * weight / sum(weights)  # what its pods use together
            replicas = max(replicas, min(16, math.ceil(cores / f / MOST)))
            cpu = min(MOST, max(0.05, round(cores / replicas / f * 20) / 20))
            scale = []
            for _ in range(rng.randint(0, 2)):
                at = rng.uniform(self.start, self.end)
                scale.append((at, max(1, round(replicas * rng.uniform(0.6, 1.5)))))
            self.deployment(
                rng.choice(("shop", "search", "media")),
                name,
                replicas=replicas,
                cpu=cpu,
                use=cpu * f,
                lifetime=rng.uniform(30, 120) * MINUTE,
                scale=sorted(scale),
                rollout=rng.uniform(self.start, self.end - 30 * MINUTE) if i in rolled else None,
                grace=rng.choice((rng.uniform(1, 5), 30.0)),
            )
            words.append(
                f"{name} {replicas}x{cpu:g} using {f:.1f}x" + (" (rolled)" if i in rolled else "")
            )
        self.draw("Deployments " + ", ".join(words))

    def place(self) -> Shaped:
        """Every pod without a node, placed by requests alone; bound 1-3 s after it was
        created, started 2-20 s after that (pods that named a node too). Times are whole
        seconds, as the API server's are: the history is then the same whatever its end
        (a sum of an end and a fraction rounds differently from one end to another, and a
        model on a threshold can go another way)."""
        history, rng = self.history, self.rng
        history.pods = [p for p in history.pods if p.created < history.end]
        for pod in history.pods:
            pod.created = float(round(pod.created))
            pod.end = None if pod.end is None else float(round(pod.end))
        place_like_kube_scheduler(history, random.Random(rng.random()))
        for pod in history.pods:
            if pod.node is not None and pod.created > history.start:
                pod.bound = pod.created + rng.randint(1, 3)
                pod.start = pod.bound + rng.randint(2, 20)
                if pod.end is not None and pod.end < pod.start + STEP:
                    pod.end = pod.start + STEP
        replayed = sum(1 for p in history.pods if p.created >= self.start)
        self.draw(f"{len(history.pods)} pods, {replayed} created in the range")
        return self.shaped


def _share(rng: random.Random) -> float:
    return rng.uniform(0.35, 0.5)


def issue(seed: int, end: float) -> Shaped:
    b = Builder("issue", seed, 3, end)
    rng = b.rng
    cores = rng.choice((4.0, 8.0))
    names = b.nodes(rng.randint(6, 10), lambda: cores)
    busy = sorted(rng.sample(names, 2))
    levels = {}
    for name in names:
        levels[name] = rng.uniform(0.55, 0.8) if name in busy else rng.uniform(0.1, 0.3)
        b.background(name, ((0.0, levels[name]),))
    b.draw(
        f"{len(names)} nodes of {cores:g} cores; unseen load "
        + ", ".join(f"{n} {levels[n]:.0%}" for n in busy)
        + " (the others 10-30%)"
    )
    count = rng.randint(5, 8)
    heavy = set(rng.sample(range(count), 3))
    b.workloads(
        count,
        lambda i: rng.uniform(3, 6) if i in heavy else rng.uniform(0.5, 1.2),
        _share(rng),
    )
    return b.place()


def moving(seed: int, end: float) -> Shaped:
    b = Builder("moving", seed, 3, end)
    rng = b.rng
    cores = rng.choice((4.0, 8.0))
    names = b.nodes(rng.randint(12, 20), lambda: cores)
    picked = rng.sample(names, 6)
    before, after = sorted(picked[:3]), sorted(picked[3:])
    move = b.start + rng.uniform(80, 100) * MINUTE
    for name in names:
        calm = rng.uniform(0.1, 0.3)
        busy = rng.uniform(0.55, 0.8)
        if name in before:
            b.background(name, ((0.0, busy), (move, calm)))
        elif name in after:
            b.background(name, ((0.0, calm), (move, busy)))
        else:
            b.background(name, ((0.0, calm),))
    b.draw(
        f"{len(names)} nodes of {cores:g} cores; unseen load 55-80% moves from "
        f"{', '.join(before)} to {', '.join(after)} at {(move - b.start) / 60:.0f} min"
    )
    b.workloads(
        rng.randint(8, 12),
        lambda i: math.exp(rng.uniform(math.log(0.25), math.log(4))),
        _share(rng),
    )
    return b.place()


def diurnal(seed: int, end: float) -> Shaped:
    b = Builder("diurnal", seed, 8, end)
    rng = b.rng
    names = b.nodes(rng.randint(8, 14), lambda: rng.choice((4.0, 8.0, 16.0, 32.0)))
    hour = rng.uniform(4, 10)  # the hour of the day --from is
    peak = rng.uniform(12, 17)  # the hour the cluster's unseen load peaks
    first = b.history.start
    for name in names:
        base, swing = rng.uniform(0.15, 0.35), rng.uniform(0.3, 0.6)
        shift = rng.uniform(-0.5, 0.5)
        levels = []
        for k in range(int((b.end - first) // (5 * MINUTE)) + 1):
            t = first + k * 5 * MINUTE
            clock = hour + (t - b.start) / HOUR
            level = base * (1 + swing * math.cos(2 * math.pi * (clock - peak - shift) / 24))
            levels.append((t, min(1.0, level)))
        b.background(name, levels)
    b.draw(
        f"{len(names)} nodes of "
        + "/".join(f"{n.cores:g}" for n in b.history.nodes)
        + f" cores; the range starts at {hour:.1f} h, unseen load peaks near {peak:.1f} h"
    )
    b.workloads(rng.randint(4, 7), lambda i: rng.uniform(0.5, 1.5), _share(rng))
    jobs = []
    for j in range(rng.randint(2, 4)):
        cpu = rng.choice((0.25, 0.5, 1.0))
        every = rng.choice((30.0, 60.0)) * MINUTE
        parallelism = rng.randint(4, 12)
        b.cronjob(
            "batch",
            f"report-{j + 1}",
            every=every,
            parallelism=parallelism,
            cpu=cpu,
            use=cpu * rng.uniform(0.6, 1.5),
            runs=(5 * MINUTE, 20 * MINUTE),
        )
        jobs.append(f"report-{j + 1} {parallelism}x{cpu:g} every {every / 60:.0f} min")
    b.draw("CronJobs " + ", ".join(jobs))
    return b.place()


def noisy(seed: int, end: float) -> Shaped:
    b = Builder("noisy", seed, 2, end)
    rng = b.rng
    names = b.nodes(rng.randint(40, 60), lambda: rng.choice((8.0, 16.0)))
    loud = set(rng.sample(names, rng.randint(3, 6)))
    first = b.history.start
    for name in names:
        mean = rng.uniform(0.15, 0.35)
        if name not in loud:
            b.background(name, ((0.0, mean),))
            continue
        high, width = rng.uniform(0.8, 0.95), rng.uniform(1, 3) * MINUTE
        gap = rng.uniform(5, 10) * MINUTE  # mean time between spikes' starts
        width = min(width, 0.9 * mean * gap / high)  # room below the mean for the rest
        low = (mean * gap - high * width) / (gap - width)
        levels, t = [(0.0, low)], first + rng.uniform(0, gap)
        while t < b.end:
            levels += [(t, high), (t + width, low)]
            t += width + rng.expovariate(1 / (gap - width))
        b.background(name, levels)
    b.draw(
        f"{len(names)} nodes of 8/16 cores; unseen load 15-35%, spiking to 80-95% for "
        f"up to 1-3 min every 5-10 min on {', '.join(sorted(loud))}"
    )
    for name in names:
        b.pod(
            "logging",
            f"log-agent-{name}",
            first - DAY,
            0.1,
            rng.uniform(0.05, 0.2),
            node=name,
            bound=first - DAY,
            start=first - DAY,
            owner_kind="DaemonSet",
            owner_name="log-agent",
        )
    others = rng.randint(5, 15)
    for k in range(others):
        created = rng.uniform(first, b.end - 10 * MINUTE)
        cpu = rng.choice((0.5, 1.0))
        b.pod(
            "batch",
            f"sim-{k}-{b.suffix()}",
            created,
            cpu,
            cpu * rng.uniform(0.5, 1.5),
            node=rng.choice(names),
            scheduler="batch-scheduler",
            owner_kind="",
            owner_name="",
            end=created + rng.uniform(10, 60) * MINUTE,
            grace=30.0,
        )
    b.draw(f"log-agent DaemonSet; {others} pods of batch-scheduler")
    b.workloads(
        rng.randint(12, 20),
        lambda i: math.exp(rng.uniform(math.log(0.5), math.log(2))),
        _share(rng),
    )
    return b.place()


SHAPES: dict[str, Callable[[int, float], Shaped]] = {
    "issue": issue,
    "moving": moving,
    "diurnal": diurnal,
    "noisy": noisy,
}


@dataclass(frozen=True)
class Replayed:
    """One history replayed once per tie-break seed (the replay's --seed)."""

    shape: str
    seed: int
    description: str
    history: Mapping[str, Any]
    """The replay's count of nodes and of pods by role."""
    replays: Sequence[Mapping[str, Any]]
    """Per tie-break seed: {"seed", "fidelity", "figures": row -> figure -> value}."""
    seconds: Mapping[str, float]

    @property
    def figures(self) -> dict[str, dict[str, float]]:
        """Row -> figure (FIGURES) -> its mean over the tie-break seeds."""
        rows = self.replays[0]["figures"]
        n = len(self.replays)
        return {
            row: {k: sum(r["figures"][row][k] for r in self.replays) / n for k in FIGURES}
            for row in rows
        }

    def tie_spread(self, row: str, key: str) -> float:
        """The figure's sd over the tie-break seeds alone (0 with one)."""
        return spread([r["figures"][row][key] for r in self.replays]).sd


def replay_shape(
    shaped: Shaped,
    workdir: Path,
    jobs: int = 2,
    tie_breaks: Sequence[int] = (1,),
    config: Path = SHIPPED,
) -> Replayed:
    """Backfill the history into a real Prometheus and run `decice-extender replay` on it
    once per tie-break seed (each run's JSON: workdir/replay-SEED.json)."""
    h = shaped.history
    began = time.perf_counter()
    text = h.openmetrics()
    written = time.perf_counter()
    replays, docs = [], []
    with backfilled_prometheus(text, [RULES], h.start, h.end, workdir / "prometheus") as server:
        filled = time.perf_counter()
        for seed in tie_breaks:
            out = workdir / f"replay-{seed}.json"
            command = [
                sys.executable, "-m", "extender", "replay", "--prometheus", server.api_url,
                "--from", f"{shaped.start:.0f}", "--to", f"{shaped.end:.0f}",
                "--config", str(config), "--jobs", str(jobs), "--seed", str(seed),
                "--json", str(out),
            ]  # fmt: skip
            run = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
            if run.returncode != 0:
                raise RuntimeError(
                    f"{shaped.description}: replay exited {run.returncode}:\n{run.stderr[-3000:]}"
                )
            doc = json.loads(out.read_text())
            rows = doc["scenarios"]["replay"]["schedulers"]
            figures = {row: {k: rows[row][k]["mean"] for k in FIGURES} for row in rows}
            replays.append({"seed": seed, "fidelity": doc["fidelity"], "figures": figures})
            docs.append(doc)
        replayed = time.perf_counter()
    return Replayed(
        shape=shaped.shape,
        seed=shaped.seed,
        description=shaped.description,
        history=docs[0]["history"],
        replays=replays,
        seconds={
            "history": written - began,
            "backfill": filled - written,
            "replay": (replayed - filled) / len(replays),
        },
    )


BLOCK = 7200
"""Prometheus' block: promtool cuts a backfilled history, and records the rules over it,
at these boundaries."""


def history_end() -> float:
    """The start of the last whole block: inside any retention, and on a block boundary,
    so every run cuts a history at the same places (where the blocks split it moves the
    rules' values a step here and there: a model on a threshold then goes another way)."""
    return math.floor(time.time() / BLOCK) * BLOCK - BLOCK


def summary(runs: Sequence[Replayed]) -> dict[str, dict[str, dict[str, Any]]]:
    """Row -> figure -> its spread over the histories (each its mean over tie-breaks)."""
    return {
        row: {k: asdict(spread([r.figures[row][k] for r in runs])) for k in FIGURES}
        for row in runs[0].figures
    }


def _cell(s: Mapping[str, Any], fmt: str, scale: float = 1.0) -> str:
    text = format(s["mean"] * scale, fmt)
    return text + (f" ± {format(s['sd'] * scale, fmt)}" if len(s["values"]) > 1 else "")


def table(shape: str, runs: Sequence[Replayed]) -> list[str]:
    spreads = summary(runs)
    heads = ("hot node-min", "(tie-breaks)", "pod-wait min", "waited (max min)", "unplaced",
             "exceedance %")  # fmt: skip
    lines = [["", *heads]]
    for row, s in spreads.items():
        tie = sum(r.tie_spread(row, "node_minutes_hot") for r in runs) / len(runs)
        waited = f"{_cell(s['waited'], '.1f')} ({max(s['wait_max']['values']):.1f})"
        lines.append([
            SHORT.get(row, row), _cell(s["node_minutes_hot"], ".0f"), f"±{tie:.0f}",
            _cell(s["wait_minutes"], ".0f"), waited, _cell(s["unplaced"], ".1f"),
            _cell(s["exceedance"], ".1f", 100),
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in lines) for i in range(len(heads) + 1)]
    fidelity = [f["fidelity"] for r in runs for f in r.replays]
    far = sum(1 for f in fidelity if f["far"])
    ties = len(runs[0].replays)
    head = (
        f"shape {shape}, seeds {', '.join(str(r.seed) for r in runs)} ({ties} tie-break "
        f"seeds each): {', '.join(str(r.history['nodes']) for r in runs)} nodes; pods "
        f"replayed {', '.join(str(r.history['pods'].get('replayed', 0)) for r in runs)}"
    )
    rows = (
        "  " + "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in lines
    )  # fmt: skip
    apart = "; ".join(
        f"seed {r.seed} " + ", ".join(f"{100 * f['fidelity']['distance']:.0f}%" for f in r.replays)
        for r in runs
    )
    return [
        head,
        *(f"  {r.description}" for r in runs),
        "",
        *rows,
        "",
        "  mean ± sd over the histories, each the mean over its tie-break seeds; (tie-breaks):",
        "  the sd of hot node-minutes over the tie-break seeds alone, within a history",
        f"  kube-scheduler model vs as it happened: {apart} apart ({len(fidelity) - far} of "
        f"{len(fidelity)} faithful, within 25%)",
        "  seconds per history (history, backfill, each replay): "
        + "; ".join(
            f"{r.seconds['history']:.1f}, {r.seconds['backfill']:.1f}, {r.seconds['replay']:.1f}"
            for r in runs
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape", action="append", choices=list(SHAPES), help="repeatable (default: all)"
    )
    parser.add_argument("--seed", type=int, default=1, help="the first seed (1)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per shape (3)")
    parser.add_argument(
        "--tie-breaks", type=int, default=3,
        help="replays per history, the replay's --seed 1..N: kube-scheduler's tie-breaks (3)",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="the replay's --jobs (2)")
    parser.add_argument("--config", type=Path, default=SHIPPED, help="policy (the shipped)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--keep", metavar="DIR", help="keep each history and server data here")
    args = parser.parse_args(argv)
    shapes = args.shape or list(SHAPES)
    seeds = list(range(args.seed, args.seed + max(1, args.seeds)))
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="replayshapes-"))
    end = history_end()
    results: dict[str, list[Replayed]] = {}
    try:
        for shape in shapes:
            for seed in seeds:
                shaped = SHAPES[shape](seed, end)
                workdir = root / f"{shape}-{seed}"
                workdir.mkdir(parents=True, exist_ok=True)
                ties = range(1, max(1, args.tie_breaks) + 1)
                results.setdefault(shape, []).append(
                    replay_shape(shaped, workdir, args.jobs, ties, args.config)
                )
                print(f"{shape} seed {seed}: done", file=sys.stderr)
            print("\n".join(table(shape, results[shape])) + "\n", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        doc = {
            "command": ["python", "-m", "tests.benchmarks.replayshapes", *(argv or sys.argv[1:])],
            "policy": str(SHIPPED.relative_to(ROOT)),
            "shapes": {
                shape: {
                    "seeds": [r.seed for r in runs],
                    "runs": [{**asdict(r), "figures": r.figures} for r in runs],
                    "summary": summary(runs),
                }
                for shape, runs in results.items()
            },
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
