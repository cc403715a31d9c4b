"""One scenario under one scheduler: time steps, arrivals, retries, departures, metrics.

At each tick boundary, in order: nodes due join; the tick just ended is observed by the
metric pipeline; Prometheus scrapes and evaluates (each on its interval); the plugins and
extender read what they read; waiting pods are retried; the tick's arrivals are scheduled
one at a time at their arrival time. After the measured time the run drains
(`DRAIN_SECONDS`): a pod counts as unplaced only if it still waits then.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from extender.rebalancing.plan import plan
from extender.rebalancing.pods import RunningPod
from extender.simulation.framework import Feeds
from extender.simulation.ledger import POD_WINDOW, NodeLedger, PodMeter
from extender.simulation.ours import OurExtender, pod_facts
from extender.simulation.prometheus import MetricPipeline, Pipeline
from extender.simulation.scenarios import Scenario
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.stats import Band, Metrics, PeakCalibration, Recorder
from extender.simulation.workload import EPOCH, NodeSpec, PodSpec

DRAIN_SECONDS = 2100.0  # past our waitForRoom (1800 s) and a few of the metric's refreshes


@dataclass(frozen=True, slots=True)
class Placed:
    pod: PodSpec
    node: str
    since: float  # on the engine's clock


class Rebalancer:
    """Our rebalancer's real plan over the real tables (no PodDisruptionBudgets here)."""

    def __init__(self, ours: OurExtender) -> None:
        self.ours = ours
        self.interval = max(1, round(ours.settings.rebalance.interval))
        self._streaks: dict[str, int] = {}

    def check(
        self, running: Mapping[str, Placed], now: float, waiting: Sequence[PodSpec]
    ) -> list[str]:
        self.ours.ready()
        engine = self.ours.engine
        settings = engine.settings
        pods = [_running(p, self.ours.scheduler_name) for p in running.values()]
        tables = {name: engine.table(now, p) for name, p in settings.policy_map.items()}
        cores = engine.guard.ledger.node_cores
        queued = [pod_facts(p, "", self.ours.scheduler_name) for p in waiting]
        result = plan(
            settings, pods, tables, engine.snapshot, self._streaks, cores, now, waiting=queued
        )
        self._streaks = result.streaks
        return [d.pod.facts.uid for d in result.moves]


def successor(pod: PodSpec, left: float, now: float, generation: int) -> PodSpec:
    """The pod its ReplicaSet creates once `pod` is evicted with `left` seconds to run."""
    uid = f"{pod.uid.split('~')[0]}~{generation}"
    return replace(pod, uid=uid, arrival=now, duration=max(1.0, left))


def _running(p: Placed, scheduler_name: str) -> RunningPod:
    owner = "ReplicaSet" if p.pod.workload else None
    return RunningPod(pod_facts(p.pod, p.node, scheduler_name), owner, p.since)


@dataclass(frozen=True, slots=True)
class RunResult:
    scenario: str
    seed: int
    scheduler: str
    metrics: Metrics
    bands: tuple[Band, ...]
    placements: Mapping[str, str]
    unplaced: frozenset[str]  # pods still waiting when the run ended, after its drain
    overcommitted: int  # bindings past a node's allocatable or pod count (must be 0)


class Cluster:
    """What a simulated and a replayed run share; `t` is seconds from the run's start."""

    def __init__(
        self,
        scheduler: KubeScheduler | None,
        pipeline: Pipeline,
        start: float,
        step: float,
        pod_window: int = POD_WINDOW,
    ) -> None:
        self.scheduler = scheduler
        self.pipeline = pipeline
        self.metrics = MetricPipeline(pipeline)
        self.recorder = Recorder(start, step)
        self.calibration = PeakCalibration()
        self.ledger = NodeLedger(step)
        self.meter = PodMeter(self.ledger, pipeline.scrape_interval, pod_window)
        self.joined: dict[str, NodeSpec] = {}
        self.memory: dict[str, float] = {}
        """node -> memory utilisation of its pods (they use what they request)."""
        self.feeds = Feeds(self.metrics, self.ledger, self.meter, self.joined, self.memory)
        self.waiting: list[PodSpec] = []
        self.placements: dict[str, str] = {}
        self.live: dict[str, Placed] = {}
        self.overcommitted = self.moved = 0
        ours = scheduler.extender if scheduler is not None else None
        evicts = ours is not None and ours.settings.rebalance.mode == "evict"
        self.rebalancer = Rebalancer(ours) if ours and evicts else None

    def look(self, t: float) -> None:
        """Prometheus scrapes and evaluates on its intervals; the scheduler reads."""
        p, scheduler = self.pipeline, self.scheduler
        assert scheduler is not None
        if t % p.scrape_interval == 0:
            self.metrics.scrape(list(self.joined), self.memory, at=t)
        if t % p.rule_interval == 0:
            self.metrics.evaluate(t)
        scheduler.observe(t, EPOCH + t, self.feeds)
        if t >= self.recorder.start:
            self.calibration.predicted(t, scheduler.predicted_peaks())

    def requested(self, pod: PodSpec, node: str, sign: int) -> None:
        spec = self.joined.get(node)
        if spec is not None and spec.memory > 0:
            self.memory[node] += sign * pod.memory / spec.memory

    def decide(self, pod: PodSpec, t: float) -> str | None:
        """The scheduler's node for the pod (None: it waits), binding past room counted."""
        assert self.scheduler is not None
        node = self.scheduler.schedule(pod, EPOCH + t)
        if node is not None:
            n = self.scheduler.nodes[node]
            if n.cpu_requested > n.cpu or n.memory_requested > n.memory > 0 or n.pods > n.max_pods:
                self.overcommitted += 1
        return node

    def started(self, pod: PodSpec, node: str, t: float) -> None:
        self.placements[pod.uid] = node
        self.live[pod.uid] = Placed(pod, node, EPOCH + t)
        self.requested(pod, node, 1)
        self.meter.started(pod, node, t)

    def stopped(self, pod: PodSpec, node: str, t: float) -> None:
        self.live.pop(pod.uid, None)
        self.requested(pod, node, -1)
        self.meter.stopped(pod)
        if self.scheduler is not None:
            self.scheduler.unbind(pod, node, EPOCH + t)

    def place(self, pod: PodSpec, t: float) -> bool:
        raise NotImplementedError

    def evict(self, uid: str, t: float) -> PodSpec:
        """Stops the pod; returns the successor its ReplicaSet creates."""
        raise NotImplementedError

    def offer(self, pod: PodSpec, t: float) -> None:
        if not self.place(pod, t):
            self.waiting.append(pod)

    def retry(self, t: float) -> None:
        still = []
        for pod in self.waiting:
            if self.place(pod, t):
                self.recorder.waited(pod.arrival, t)
            else:
                still.append(pod)
        self.waiting = still

    def rebalance(self, t: float) -> None:
        """The rebalancer's check: each pod it evicts stops, and its successor arrives."""
        if self.rebalancer is None or t % self.rebalancer.interval:
            return
        patience = self.rebalancer.ours.settings.herd_guard.wait_for_room
        waiting = [p for p in self.waiting if t - p.arrival < patience]
        for uid in self.rebalancer.check(self.live, EPOCH + t, waiting):
            self.moved += 1
            self.offer(self.evict(uid, t), t)

    def result(self, scenario: str, seed: int, name: str, offered: int, end: float) -> RunResult:
        for pod in self.waiting:
            self.recorder.waited(pod.arrival, end, placed=False)
        shares = self.calibration.shares()
        metrics = self.recorder.metrics(len(self.waiting), offered, self.moved, shares)
        return RunResult(
            scenario=scenario,
            seed=seed,
            scheduler=name,
            metrics=metrics,
            bands=tuple(self.recorder.bands),
            placements=self.placements,
            unplaced=frozenset(p.uid for p in self.waiting),
            overcommitted=self.overcommitted,
        )


class Run(Cluster):
    def __init__(self, scenario: Scenario, scheduler: KubeScheduler, pipeline: Pipeline) -> None:
        super().__init__(scheduler, pipeline, scenario.size.warmup, pipeline.tick)
        self.scheduler: KubeScheduler = scheduler
        self.scenario = scenario
        self.nodes: list[NodeSpec] = []
        self.usage: dict[str, float] = {}  # node -> cores its pods really use
        self.cores: dict[str, float] = {}
        self.running: list[tuple[float, str, PodSpec, str]] = []  # (end, uid, pod, node), a heap
        self.evicted: set[str] = set()
        """Evicted pods still in `running` (skipped when they come due)."""
        self.last: dict[str, float] = {}  # node -> capped utilisation of the tick just recorded
        self.measuring = True  # False while draining

    def utilisation(self, node: str, t: float) -> float:
        """Demand: (background + its pods' real use) / cores, uncapped."""
        return self.scenario.background.at(node, t) + self.usage[node] / self.cores[node]

    def join(self, t: float) -> None:
        if t == 0:  # the cluster's nodes were scraped long before the run
            self.metrics.known(n.name for n in self.scenario.nodes if n.added_at <= 0)
        for node in self.scenario.nodes:
            if node.name not in self.cores and node.added_at <= t:
                self.nodes.append(node)
                self.joined[node.name] = node
                self.cores[node.name] = float(node.cores)
                self.usage[node.name] = 0.0
                self.memory[node.name] = 0.0
                self.scheduler.add_node(node)

    def leave(self, until: float) -> None:
        while self.running and self.running[0][0] <= until:
            end, uid, pod, node = heapq.heappop(self.running)
            if uid in self.evicted:
                self.evicted.discard(uid)
                continue
            self.stop(pod, node, end)

    def stop(self, pod: PodSpec, node: str, t: float) -> None:
        self.usage[node] -= pod.usage
        self.stopped(pod, node, t)

    def evict(self, uid: str, t: float) -> PodSpec:
        placed = self.live[uid]
        end = next(e for e, u, _, _ in self.running if u == uid)
        self.stop(placed.pod, placed.node, t)
        self.evicted.add(uid)
        return successor(placed.pod, end - t, t, self.moved)

    def place(self, pod: PodSpec, t: float) -> bool:
        node = self.decide(pod, t)
        if node is None:
            return False
        if self.measuring:
            self.recorder.placed(t, min(1.0, self.utilisation(node, t)), node)
        self.calibration.placed(node, t)
        self.usage[node] += pod.usage
        self.started(pod, node, t)
        heapq.heappush(self.running, (t + pod.duration, pod.uid, pod, node))
        return True

    def record(self, t: float) -> None:
        demand = [self.utilisation(n.name, t) for n in self.nodes]
        cpu = [min(1.0, d) for d in demand]
        self.last = {n.name: u for n, u in zip(self.nodes, cpu, strict=True)}
        if self.measuring:
            names = [n.name for n in self.nodes]
            self.recorder.record(t, cpu, demand, names)
            self.calibration.observe(t, names, cpu)
        index = round(t / self.pipeline.tick)
        for n, d in zip(self.nodes, demand, strict=True):
            self.ledger.record(index, n.name, d, self.memory[n.name])


def simulate(scenario: Scenario, scheduler: KubeScheduler, pipeline: Pipeline) -> RunResult:
    run = Run(scenario, scheduler, pipeline)
    tick, end, pods = pipeline.tick, scenario.size.end, scenario.pods
    next_pod = 0
    t = 0
    while t < end or (run.waiting and t < end + DRAIN_SECONDS):
        run.measuring = t < end
        run.join(t)
        for node, utilisation in run.last.items():  # the tick just ended
            run.metrics.observe(node, utilisation, tick)
        run.look(t)
        run.retry(t)
        run.rebalance(t)
        while run.measuring and next_pod < len(pods) and pods[next_pod].arrival < t + tick:
            pod = pods[next_pod]
            next_pod += 1
            run.leave(pod.arrival)
            run.offer(pod, pod.arrival)
        run.leave(t + tick)
        run.record(t)
        t += tick
    return run.result(scenario.name, scenario.seed, scheduler.name, next_pod, t)
