"""One scenario under one scheduler: time steps, arrivals, retries, departures, metrics.

At each tick boundary, in order: nodes due join; the tick just ended is observed by the
metric pipeline; Prometheus scrapes and evaluates (each on its interval); the plugins and
extender read what they read; waiting pods are retried; the tick's arrivals are scheduled
one at a time at their arrival time. After the measured time the run drains
(`DRAIN_SECONDS`): a pod counts as unplaced only if it still waits then.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from extender.simulation.framework import Feeds
from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.prometheus import MetricPipeline, Pipeline
from extender.simulation.rebalance import Placed, Rebalancer, successor
from extender.simulation.scenarios import Scenario
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.stats import Band, Metrics, PeakCalibration, Recorder
from extender.simulation.workload import EPOCH, NodeSpec, PodSpec

DRAIN_SECONDS = 2100.0
"""Past our waitForRoom (1800 s) and a few of the metric's refreshes."""


@dataclass(frozen=True, slots=True)
class RunResult:
    scenario: str
    seed: int
    scheduler: str
    metrics: Metrics
    bands: tuple[Band, ...]
    placements: Mapping[str, str]
    unplaced: frozenset[str]
    """Pods still waiting when the run ended, after its drain."""
    overcommitted: int
    """Bindings past a node's allocatable or pod count (must be 0)."""


class Run:
    def __init__(self, scenario: Scenario, scheduler: KubeScheduler, pipeline: Pipeline) -> None:
        self.scenario = scenario
        self.scheduler = scheduler
        self.pipeline = pipeline
        self.metrics = MetricPipeline(pipeline)
        self.recorder = Recorder(scenario.size.warmup, pipeline.tick)
        self.calibration = PeakCalibration()
        self.ledger = NodeLedger(pipeline.tick)
        self.meter = PodMeter(self.ledger, pipeline.scrape_interval)
        self.nodes: list[NodeSpec] = []
        self.joined: dict[str, NodeSpec] = {}
        self.usage: dict[str, float] = {}
        """node -> cores its pods really use."""
        self.memory: dict[str, float] = {}
        """node -> memory utilisation of its pods (they use what they request)."""
        self.cores: dict[str, float] = {}
        self.feeds = Feeds(self.metrics, self.ledger, self.meter, self.joined, self.memory)
        self.running: list[tuple[float, str, PodSpec, str]] = []
        """(end, uid, pod, node), a heap."""
        self.waiting: list[PodSpec] = []
        self.placements: dict[str, str] = {}
        self.live: dict[str, Placed] = {}
        self.evicted: set[str] = set()
        """Evicted pods still in `running` (skipped when they come due)."""
        ours = scheduler.extender
        self.rebalancer = Rebalancer(ours) if ours and Rebalancer.active(ours) else None
        self.overcommitted = 0
        self.moved = 0
        self.last: dict[str, float] = {}
        """node -> capped utilisation of the tick just recorded."""
        self.measuring = True
        """False while draining."""

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

    def observe(self, t: float) -> None:
        p = self.pipeline
        for node, utilisation in self.last.items():
            self.metrics.observe(node, utilisation, p.tick)
        if t % p.scrape_interval == 0:
            self.metrics.scrape([n.name for n in self.nodes], self.memory, at=t)
        if t % p.rule_interval == 0:
            self.metrics.evaluate(t)
        self.scheduler.observe(t, EPOCH + t, self.feeds)
        if t >= self.scenario.size.warmup:
            self.calibration.predicted(t, self.scheduler.predicted_peaks())

    def leave(self, until: float) -> None:
        while self.running and self.running[0][0] <= until:
            end, uid, pod, node = heapq.heappop(self.running)
            if uid in self.evicted:
                self.evicted.discard(uid)
                continue
            self.stop(pod, node, end)

    def stop(self, pod: PodSpec, node: str, t: float) -> None:
        self.usage[node] -= pod.usage
        self.memory[node] -= pod.memory / self.joined[node].memory
        self.meter.stopped(pod)
        self.live.pop(pod.uid, None)
        self.scheduler.unbind(pod, node, EPOCH + t)

    def rebalance(self, t: float) -> None:
        """The rebalancer's check: each pod it evicts stops, and its successor arrives."""
        if self.rebalancer is None or t % self.rebalancer.interval:
            return
        ends = {uid: end for end, uid, _, _ in self.running}
        for uid in self.rebalancer.check(self.live, EPOCH + t):
            placed = self.live[uid]
            self.stop(placed.pod, placed.node, t)
            self.evicted.add(uid)
            self.moved += 1
            pod = successor(placed.pod, ends[uid] - t, t, self.moved)
            if not self.place(pod, t):
                self.waiting.append(pod)

    def place(self, pod: PodSpec, t: float) -> bool:
        node = self.scheduler.schedule(pod, EPOCH + t)
        if node is None:
            return False
        if self.measuring:
            self.recorder.placed(t, min(1.0, self.utilisation(node, t)), node)
        n = self.scheduler.nodes[node]
        if n.cpu_requested > n.cpu or n.memory_requested > n.memory or n.pods > n.max_pods:
            self.overcommitted += 1
        self.usage[node] += pod.usage
        self.memory[node] += pod.memory / self.joined[node].memory
        self.meter.started(pod, node, t)
        self.placements[pod.uid] = node
        self.live[pod.uid] = Placed(pod, node, EPOCH + t)
        heapq.heappush(self.running, (t + pod.duration, pod.uid, pod, node))
        return True

    def retry(self, t: float) -> None:
        still = []
        for pod in self.waiting:
            if self.place(pod, t):
                self.recorder.waited(pod.arrival, t)
            else:
                still.append(pod)
        self.waiting = still

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
    tick = pipeline.tick
    end = scenario.size.end
    pods = scenario.pods
    next_pod = 0
    t = 0
    while t < end:
        run.join(t)
        run.observe(t)
        run.retry(t)
        run.rebalance(t)
        while next_pod < len(pods) and pods[next_pod].arrival < t + tick:
            pod = pods[next_pod]
            next_pod += 1
            run.leave(pod.arrival)
            if not run.place(pod, pod.arrival):
                run.waiting.append(pod)
        run.leave(t + tick)
        run.record(t)
        t += tick
    run.measuring = False
    while run.waiting and t < end + DRAIN_SECONDS:
        run.join(t)
        run.observe(t)
        run.retry(t)
        run.rebalance(t)
        run.leave(t + tick)
        run.record(t)
        t += tick
    for pod in run.waiting:
        run.recorder.waited(pod.arrival, t, placed=False)
    metrics = run.recorder.metrics(len(run.waiting), next_pod, run.moved, run.calibration.shares())
    return RunResult(
        scenario=scenario.name,
        seed=scenario.seed,
        scheduler=scheduler.name,
        metrics=metrics,
        bands=tuple(run.recorder.bands),
        placements=run.placements,
        unplaced=frozenset(p.uid for p in run.waiting),
        overcommitted=run.overcommitted,
    )
