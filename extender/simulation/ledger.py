"""What ran where, tick by tick: the record every measuring agent (Prometheus' per-pod
rules, koordlet) reads, so they differ only in windows and lags. A node short of CPU
serves everyone on it in proportion; running sums make any window's mean two lookups.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

from extender.simulation.prometheus import extrapolated_share
from extender.simulation.workload import PodSpec

POD_WINDOW = 300  # the stock per-pod CPU rules' `[5m]` (kubernetes-mixin)


class NodeLedger:
    def __init__(self, tick: float) -> None:
        self.tick = tick
        self._first: dict[str, int] = {}
        self._cpu: dict[str, array[float]] = {}
        self._served: dict[str, array[float]] = {}
        self._memory: dict[str, array[float]] = {}

    def record(self, index: int, node: str, demand: float, memory: float) -> None:
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

    def _mean(self, sums: dict[str, array[float]], node: str, start: int, end: int) -> float | None:
        """The mean over ticks [start, end) (None: none recorded)."""
        first = self._first.get(node)
        if first is None:
            return None
        a, b = max(start - first, 0), min(end - first, len(sums[node]) - 1)
        return (sums[node][b] - sums[node][a]) / (b - a) if b > a else None

    def cpu(self, node: str, start: int, end: int) -> float | None:
        return self._mean(self._cpu, node, start, end)

    def served(self, node: str, start: int, end: int) -> float | None:
        return self._mean(self._served, node, start, end)

    def memory(self, node: str, start: int, end: int) -> float | None:
        return self._mean(self._memory, node, start, end)


@dataclass(frozen=True, slots=True)
class Running:
    pod: PodSpec
    node: str
    start: float


class PodMeter:
    def __init__(self, ledger: NodeLedger, scrape_interval: int, window: int = POD_WINDOW) -> None:
        self.ledger = ledger
        self.scrape = scrape_interval
        self.window = window
        self.running: dict[str, Running] = {}
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
        tick = self.ledger.tick
        served = self.ledger.served(entry.node, math.floor(start / tick), math.ceil(end / tick))
        return None if served is None else entry.pod.usage * served

    def _samples(self, entry: Running, t: float) -> tuple[float, float, int] | None:
        """(first, last, count) of its cAdvisor samples in (t - window, t]."""
        scrape = self.scrape
        first = max(
            math.floor(entry.start / scrape) + 1, math.floor((t - self.window) / scrape) + 1
        )
        last = math.floor(t / scrape)
        if last <= first:
            return None
        return first * scrape, last * scrape, last - first + 1

    def rate(self, entry: Running, t: float) -> float | None:
        """The stock `...:sum_rate5m` at `t`: a young pod shows the share its series covers."""
        samples = self._samples(entry, t)
        if samples is None:
            return None
        first, last, count = samples
        use = self._use(entry, first, last)
        if use is None:
            return None
        return use * extrapolated_share(first, last, t, self.window, count, entry.start)

    def irate(self, entry: Running, t: float) -> float | None:
        """The stock `...:sum_irate` at `t`: its real use from two samples on."""
        samples = self._samples(entry, t)
        if samples is None:
            return None
        last = samples[1]
        return self._use(entry, last - self.scrape, last)

    def average(self, entry: Running, t: float, window: float) -> float | None:
        """Its mean use over [t - window, t] (koordlet samples every second)."""
        start = max(entry.start, t - window)
        if t - start < 1.0:
            return None
        return self._use(entry, start, t)
