"""What ran where, tick by tick: the record every measuring agent reads from.

Agents measure the same nodes and pods on their own clocks and windows: Prometheus scrapes
cAdvisor's per-pod CPU counters (a pod's series starts when the pod starts: its `irate`
is its real use as soon as it has two samples, its 5-minute `rate` is diluted until the
series covers the window), and koordlet samples the node and its pods itself and averages
over its aggregation window (peers.koordlet). Both read the same record here, so they
differ only in their windows and lags, as in a cluster.

A node short of CPU (its demand above its cores) serves every consumer on it in
proportion: a pod's counter then grows by its use times the node's served share, which is
what a real pod's CPU series shows of a hog's neighbours. Per node the record keeps, from
the tick the node joined, running sums of its capped utilisation, served share and memory
utilisation, so any window's mean is two lookups.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

from extender.simulation.prometheus import extrapolated_share
from extender.simulation.workload import PodSpec

POD_WINDOW = 300
"""The range of the stock per-pod CPU rules (kubernetes-mixin: `[5m]`)."""


class NodeLedger:
    """Per node, running sums over ticks of utilisation (capped), served share, memory."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self._first: dict[str, int] = {}
        """node -> the index of its first recorded tick."""
        self._cpu: dict[str, array[float]] = {}
        self._served: dict[str, array[float]] = {}
        self._memory: dict[str, array[float]] = {}

    def record(self, index: int, node: str, demand: float, memory: float) -> None:
        """Tick `index` (covering [index * tick, (index + 1) * tick)) of `node`."""
        cpu = self._cpu.get(node)
        if cpu is None:
            self._first[node] = index
            cpu = self._cpu[node] = array("d", [0.0])
            self._served[node] = array("d", [0.0])
            self._memory[node] = array("d", [0.0])
        served = self._served[node]
        cpu.append(cpu[-1] + min(1.0, demand))
        served.append(served[-1] + (1.0 if demand <= 1.0 else 1.0 / demand))
        mem = self._memory[node]
        mem.append(mem[-1] + memory)

    def _span(self, node: str, start: int, end: int) -> tuple[int, int] | None:
        """Offsets into the node's sums for ticks [start, end), clipped to what it has."""
        first = self._first.get(node)
        if first is None:
            return None
        a = max(start - first, 0)
        b = min(end - first, len(self._cpu[node]) - 1)
        return (a, b) if b > a else None

    def _mean(self, sums: array[float], span: tuple[int, int]) -> float:
        a, b = span
        return (sums[b] - sums[a]) / (b - a)

    def cpu(self, node: str, start: int, end: int) -> float | None:
        """Mean capped utilisation over ticks [start, end) (None: no tick of it recorded)."""
        span = self._span(node, start, end)
        return None if span is None else self._mean(self._cpu[node], span)

    def served(self, node: str, start: int, end: int) -> float | None:
        span = self._span(node, start, end)
        return None if span is None else self._mean(self._served[node], span)

    def memory(self, node: str, start: int, end: int) -> float | None:
        span = self._span(node, start, end)
        return None if span is None else self._mean(self._memory[node], span)


@dataclass(frozen=True, slots=True)
class Running:
    pod: PodSpec
    node: str
    start: float


class PodMeter:
    """The pods running now and what each one's CPU series shows."""

    def __init__(self, ledger: NodeLedger, scrape_interval: int, window: int = POD_WINDOW) -> None:
        self.ledger = ledger
        self.scrape = scrape_interval
        self.window = window
        """The range of the per-pod rules (the stock ones: 5 minutes)."""
        self.running: dict[str, Running] = {}
        """uid -> the pod, in the order they started."""
        self.on_node: dict[str, dict[str, Running]] = {}

    def started(self, pod: PodSpec, node: str, t: float) -> None:
        entry = Running(pod, node, t)
        self.running[pod.uid] = entry
        self.on_node.setdefault(node, {})[pod.uid] = entry

    def stopped(self, pod: PodSpec) -> None:
        entry = self.running.pop(pod.uid, None)
        if entry is not None:
            del self.on_node[entry.node][pod.uid]

    def _use(self, entry: Running, start: float, end: float) -> float | None:
        """Its use over [start, end), in cores: its own times its node's served share."""
        tick = self.ledger.tick
        served = self.ledger.served(entry.node, math.floor(start / tick), math.ceil(end / tick))
        return None if served is None else entry.pod.usage * served

    def _samples(self, entry: Running, t: float) -> tuple[float, float, int] | None:
        """(first, last, count) of its series' samples inside (t - window, t]: cAdvisor's
        series of a container begins at the first scrape after it started."""
        scrape = self.scrape
        first = max(
            math.floor(entry.start / scrape) + 1, math.floor((t - self.window) / scrape) + 1
        )
        last = math.floor(t / scrape)
        if last <= first:
            return None
        return first * scrape, last * scrape, last - first + 1

    def rate(self, entry: Running, t: float) -> float | None:
        """What the stock rule
        `node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m` says of
        the pod at `t` (its one container): PromQL's rate() over 5 minutes, so a pod younger
        than that shows only the share of the window its series covers
        (prometheus.extrapolated_share; the counter starts from 0 when it starts). None
        before it has two samples."""
        samples = self._samples(entry, t)
        if samples is None:
            return None
        first, last, count = samples
        use = self._use(entry, first, last)
        if use is None:
            return None
        return use * extrapolated_share(first, last, t, self.window, count, entry.start)

    def irate(self, entry: Running, t: float) -> float | None:
        """What the stock rule `...:sum_irate` says of the pod at `t`: the rate between its
        last two samples, its real use as soon as it has two."""
        samples = self._samples(entry, t)
        if samples is None:
            return None
        last = samples[1]
        return self._use(entry, last - self.scrape, last)

    def average(self, entry: Running, t: float, window: float) -> float | None:
        """Its mean use over the samples of [t - window, t] taken every tick or more often
        (koordlet: every second); None when it started at `t`."""
        start = max(entry.start, t - window)
        if t - start < 1.0:
            return None
        return self._use(entry, start, t)
