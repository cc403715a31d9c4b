"""A History replayed under one scheduler model, with the simulation's metric pipeline.

Each tick boundary runs in the simulation's order (extender.simulation.run), then the tick's
events: departures, pods keeping their node, arrivals. A replayed pod uses, from its bind
plus its real start-up delay, what it really used step by step; in the `real` run every pod
goes where and when it went: the "as it happened" row.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from extender.policy.settings import Settings
from extender.replay.model import History, ReplayNode, ReplayPod, Role
from extender.replay.models import REAL, SCHEDULERS, Options, build, node_spec
from extender.simulation.experiment import fork_map
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import Cluster, RunResult
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.upstream import NodeRequests
from extender.simulation.workload import PodSpec

KEPT = frozenset({Role.EARLIER, Role.OTHER_SCHEDULER, Role.PINNED, Role.OUTSIDE})


# Event kinds: at one instant, departures first, then pods keeping their node, then arrivals.
END, KEPT_END, KEPT_BIND, ARRIVAL = range(4)


@dataclass(slots=True)
class Placed:
    pod: ReplayPod
    spec: PodSpec
    node: str
    first: int  # the step its use begins on its node


TEMPLATE_HASH = "replayed"
"""The stock owner rule names the Deployment only: its pods share this stand-in hash."""


def successor(pod: ReplayPod, at: float, done: int, generation: int, step: int) -> ReplayPod:
    """The pod its ReplicaSet creates at `at`, `pod` evicted `done` steps into its use."""
    rest = pod.usage[done:]
    return replace(
        pod,
        uid=f"{pod.uid.split('~')[0]}~{generation}",
        name=f"{pod.name.split('~')[0]}~{generation}",
        arrival=at,
        bound=at,
        start=at,
        end=at + len(rest) * step,
        usage=rest,
    )


def spec_of(pod: ReplayPod, start: float) -> PodSpec:
    """The pod as the simulation's schedulers take it (a Deployment's: `namespace.name`)."""
    workload = ""
    if pod.workload is not None and pod.workload.startswith("deployment "):
        workload = pod.workload.removeprefix("deployment ").replace("/", ".")
    return PodSpec(
        pod.uid,
        pod.cpu_milli,
        pod.memory,
        sum(pod.usage) / len(pod.usage) if pod.usage else 0.0,
        pod.arrival - start,
        pod.runs,
        workload=workload,
        template_hash=TEMPLATE_HASH if workload else "",
    )


class Replay(Cluster):
    """The mutable state of one run; times are seconds from the grid's start (`r`)."""

    def __init__(self, history: History, model: KubeScheduler | None, pipeline: Pipeline) -> None:
        grid = history.grid
        if grid.step != int(grid.step):
            raise ValueError("the replay's step must be whole seconds")
        step = int(grid.step)
        super().__init__(model, pipeline, grid.measured_from * step, step, pipeline.rate_window)
        self.history = history
        self.grid = grid
        self.step = step
        self.tick = math.gcd(step, pipeline.tick)
        self.load = {n: array("d", bytes(8 * grid.steps)) for n in history.nodes}
        """node -> cores its replayed pods use, per step."""
        self.present: dict[str, ReplayNode] = {}
        self._columns: list[tuple[array[float], array[float], float]] = []
        self.kept: dict[str, dict[str, PodSpec]] = {}
        """node -> uid -> pods keeping that node, running now."""
        self.running: dict[str, Placed] = {}
        self.pods: dict[str, ReplayPod] = {}  # uid -> each replayed pod offered and not yet placed
        self.events: list[tuple[float, int, int, ReplayPod, str]] = []
        self._seq = itertools.count()
        self.offered = 0

    # --- events
    def push(self, t: float, kind: int, pod: ReplayPod, node: str = "") -> None:
        heapq.heappush(self.events, (t, kind, next(self._seq), pod, node))

    def schedule_events(self, real: bool) -> None:
        start = self.grid.start
        for pod in self.history.pods:
            if pod.role in KEPT and pod.node is not None:
                self.push(max(pod.bound, start) - start, KEPT_BIND, pod, pod.node)
            elif pod.role is Role.REPLAYED:
                self.offered += 1
                self.push((pod.bound if real else pod.arrival) - start, ARRIVAL, pod)

    # --- CPU and memory
    def occupy(self, spec: PodSpec, node: str, sign: int) -> None:
        """A pod keeping its real node: kube-scheduler's cache counts its requests all the same."""
        self.requested(spec, node, sign)
        cache = self.scheduler.nodes.get(node) if self.scheduler is not None else None
        if cache is not None:
            cache.add(spec.cpu_milli, spec.memory, spec.replicaset, sign)

    def observe_and_record(self, r: int, elapsed: int) -> None:
        """The step holding r - tick ran `elapsed` s since the last look; recorded at its end."""
        k = (r - self.tick) // self.step
        demand = [(bg[k] + load[k]) * inverse for bg, load, inverse in self._columns]
        cpu = [min(1.0, d) for d in demand]
        if self.scheduler is not None:
            observe = self.metrics.observe
            for name, u in zip(self.present, cpu, strict=True):
                observe(name, u, elapsed)
        if r % self.step == 0:
            names = list(self.present)
            self.recorder.record(k * self.step, cpu, demand, names)
            if k * self.step >= self.recorder.start:
                self.calibration.observe(k * self.step, names, cpu)
            if self.scheduler is not None:
                for name, d in zip(self.present, demand, strict=True):
                    self.ledger.record(k, name, d, self.memory[name])

    def columns(self) -> list[tuple[array[float], array[float], float]]:
        return [(n.background, self.load[n.name], 1.0 / n.cores) for n in self.present.values()]

    # --- nodes
    def nodes_change(self, k: int, r: float) -> None:
        for node in self.history.nodes.values():
            if node.first == k:
                self.join(node)
            elif node.last == k - 1 and node.name in self.present:
                for uid in [u for u, p in self.running.items() if p.node == node.name]:
                    self.end(self.running[uid], r)  # in reality: a new pod, elsewhere
                del self.present[node.name]
                self._columns = self.columns()
                self.joined.pop(node.name, None)
                self.memory.pop(node.name, None)
                if self.scheduler is not None:
                    self.scheduler.nodes.pop(node.name, None)

    def join(self, node: ReplayNode) -> None:
        self.present[node.name] = node
        self._columns = self.columns()
        self.joined[node.name] = node_spec(node)
        self.memory[node.name] = 0.0
        if self.scheduler is not None:
            cpu = round(node.cores * 1000)
            self.scheduler.nodes[node.name] = NodeRequests(
                node.name, cpu, node.memory, node.max_pods
            )
        for spec in self.kept.get(node.name, {}).values():
            self.occupy(spec, node.name, 1)

    # --- pods
    def bind(self, pod: ReplayPod, spec: PodSpec, node: str, r: float) -> None:
        grid = self.grid
        where = self.history.nodes.get(node)
        first = grid.index(grid.start + r + pod.startup)
        if where is not None:
            k = grid.index(grid.start + r)
            use = (where.background[k] + self.load[node][k]) / where.cores
            self.recorder.placed(r, min(1.0, use), node)
            self.calibration.placed(node, r)
            load = self.load[node]
            for i in range(max(0, -first), min(len(pod.usage), grid.steps - first)):
                load[first + i] += pod.usage[i]
        self.running[pod.uid] = Placed(pod, spec, node, first)
        self.started(spec, node, r)
        self.push(r + pod.startup + pod.runs, END, pod, node)

    def place(self, pod: PodSpec, t: float) -> bool:
        node = self.decide(pod, t)
        if node is not None:
            self.bind(self.pods.pop(pod.uid), pod, node, t)
        return node is not None

    def end(self, placed: Placed, r: float) -> None:
        self.running.pop(placed.pod.uid, None)
        self.stopped(placed.spec, placed.node, r)

    def evict(self, uid: str, t: float) -> PodSpec:
        """What the pod would still have used leaves its node; its successor uses the rest."""
        placed = self.running[uid]
        done = max(0, self.grid.index(self.grid.start + t) - placed.first)
        load = self.load[placed.node]
        for i in range(done, len(placed.pod.usage)):
            if 0 <= placed.first + i < self.grid.steps:
                load[placed.first + i] -= placed.pod.usage[i]
        self.end(placed, t)
        pod = successor(placed.pod, self.grid.start + t, done, self.moved, self.step)
        self.pods[pod.uid] = pod
        return spec_of(pod, self.grid.start)

    def handle(self, r: float, kind: int, pod: ReplayPod, node: str, real: bool) -> None:
        start = self.grid.start
        if kind == END:
            placed = self.running.get(pod.uid)
            if placed is not None and placed.node == node:
                self.end(placed, r)
        elif kind == KEPT_BIND:
            spec = spec_of(pod, start)
            self.kept.setdefault(node, {})[pod.uid] = spec
            if node in self.present:
                self.occupy(spec, node, 1)
            if pod.end < self.grid.end:
                self.push(pod.end - start, KEPT_END, pod, node)
        elif kind == KEPT_END:
            gone = self.kept.get(node, {}).pop(pod.uid, None)
            if gone is not None and node in self.present:
                self.occupy(gone, node, -1)
        elif real:
            assert pod.node is not None
            self.bind(pod, spec_of(pod, start), pod.node, r)
        else:
            self.pods[pod.uid] = pod
            self.offer(spec_of(pod, start), r)


def replay(
    history: History, model: KubeScheduler | None, pipeline: Pipeline, seed: int = 1
) -> RunResult:
    """Run `history` under `model`; None: the real placements ("as it happened")."""
    real = model is None
    run = Replay(history, model, pipeline)
    run.schedule_events(real)
    tick, p = run.tick, pipeline
    end = history.grid.steps * run.step
    elapsed = 0
    for r in range(0, end + 1, tick):
        if r > 0:
            elapsed += tick
            if r % run.step == 0 or r % p.scrape_interval == 0:
                run.observe_and_record(r, elapsed)
                elapsed = 0
        if r == end:
            break
        if r % run.step == 0:
            run.nodes_change(r // run.step, r)
        if model is not None:  # what happened reads no metric
            run.look(r)
            run.retry(r)
            run.rebalance(r)
        while run.events and run.events[0][0] < r + tick:
            at, kind, _, pod, node = heapq.heappop(run.events)
            run.handle(at, kind, pod, node, real)
    name = REAL if model is None else model.name
    return run.result("replay", seed, name, run.offered, end)


LONGEST_FIRST = (*SCHEDULERS[1:], SCHEDULERS[0], REAL)  # ours and the peers read metrics


@dataclass(frozen=True, slots=True)
class Work:
    history: History
    settings: Settings
    options: Options
    pipeline: Pipeline


def one(name: str, w: Work) -> tuple[RunResult, float]:
    """One row's run and the CPU seconds it took."""
    began = time.process_time()
    model = None if name == REAL else build(name, w.settings, w.options)
    return replay(w.history, model, w.pipeline, w.options.seed), time.process_time() - began


def run_all(
    work: Work,
    jobs: int,
    progress: Callable[[float], None],
    models: Sequence[str] = SCHEDULERS,
    cpu: dict[str, float] | None = None,
) -> dict[str, RunResult]:
    """Row name -> its run, the real placements first; `cpu` gets each row's CPU seconds."""
    names = [REAL, *(m for m in SCHEDULERS if m in models)]
    spent = cpu if cpu is not None else {}
    progress(0.0)

    def finished(name: str, result: tuple[RunResult, float]) -> None:
        spent[name] = result[1]
        progress(len(spent) / len(names))

    first = [n for n in LONGEST_FIRST if n in names] if jobs > 1 else names
    runs = fork_map(one, work, first, jobs, finished)
    progress(1.0)
    return {name: runs[name][0] for name in names}
