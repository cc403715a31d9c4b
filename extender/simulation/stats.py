"""What a run is judged by, over the measured window: node CPU = (background + its pods'
real use) / cores, capped at 100 %; the uncapped figure is the demand.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HOT = 0.9  # hot: 5 points over the shipped filter threshold (0.85), its margin for noise and lag
EXCEEDANCE_WINDOW = 300.0  # the rule's 5-minute window: a placed pod shows whole by then


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between ranks (numpy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def pstdev(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


@dataclass(frozen=True, slots=True)
class Metrics:
    node_minutes_hot: float
    cpu_p95: float
    cpu_max: float
    demand_p95: float
    demand_max: float
    cpu_std: float  # across nodes, averaged over ticks
    placed_on_hot: int
    unplaced: int
    pods: int
    waited: int
    wait_p95: float = 0.0
    wait_max: float = 0.0
    wait_minutes: float = 0.0
    """Every pod's wait in the measured time, the unplaced included: a cost beside heat."""
    moved: int = 0
    exceedance: float = 0.0
    """The share of placements whose node went above 90 % within EXCEEDANCE_WINDOW."""
    peak_1sd: float = -1.0
    """The share of predicted peaks (mean + k sd) exceeded later; -1: none predicted."""
    peak_2sd: float = -1.0
    peak_3sd: float = -1.0


SIGMAS = (1.0, 2.0, 3.0)


class PeakCalibration:
    """How often a predicted peak is exceeded later ("Take it to the limit", EuroSys 2021).
    A node given a pod within the horizon is not judged: a prediction is of the load on
    the node, not of pods placed after it (the herd guard counts those)."""

    def __init__(self) -> None:
        self._due: deque[tuple[float, Mapping[str, tuple[float, float]]]] = deque()
        self._last_placed: dict[str, float] = {}
        self._seen = 0
        self._over = [0] * len(SIGMAS)

    def predicted(self, t: float, peaks: Mapping[str, tuple[float, float]]) -> None:
        if peaks:
            self._due.append((t + EXCEEDANCE_WINDOW, peaks))

    def placed(self, node: str, t: float) -> None:
        self._last_placed[node] = t

    def observe(self, t: float, names: Sequence[str], cpu: Sequence[float]) -> None:
        if not self._due or self._due[0][0] > t:
            return
        now = dict(zip(names, cpu, strict=True))
        while self._due and self._due[0][0] <= t:
            due, peaks = self._due.popleft()
            since = due - EXCEEDANCE_WINDOW
            for node, (mean, sd) in peaks.items():
                u = now.get(node)
                if u is None or sd <= 0 or self._last_placed.get(node, -math.inf) > since:
                    continue
                self._seen += 1
                for i, k in enumerate(SIGMAS):
                    self._over[i] += u > mean + k * sd

    def shares(self) -> tuple[float, ...]:
        if not self._seen:
            return (-1.0,) * len(SIGMAS)
        return tuple(o / self._seen for o in self._over)


@dataclass(frozen=True, slots=True)
class Band:
    t: float
    p50: float
    p95: float
    max: float
    demand_max: float


class Recorder:
    def __init__(self, start: float, tick: float) -> None:
        self.start = start
        self.tick = tick
        self._cpu = array("d")
        self._demand = array("d")
        self._hot_ticks = 0
        self._std_sum = 0.0
        self._ticks = 0
        self.bands: list[Band] = []
        self.placed_on_hot = 0
        self._pending: dict[str, list[float]] = {}
        self._placements = 0
        self._exceeded = 0
        self._waits: list[float] = []
        self._wait_seconds = 0.0

    def record(
        self,
        t: float,
        cpu: Sequence[float],
        demand: Sequence[float],
        names: Sequence[str] = (),
    ) -> None:
        if self._pending:
            self._judge(t, cpu, names)
        top = max(cpu, default=0.0)
        self.bands.append(
            Band(t, percentile(cpu, 50), percentile(cpu, 95), top, max(demand, default=0.0))
        )
        if t < self.start:
            return
        self._cpu.extend(cpu)
        self._demand.extend(demand)
        self._hot_ticks += sum(1 for u in cpu if u > HOT)
        self._std_sum += pstdev(cpu)
        self._ticks += 1

    def placed(self, t: float, utilisation: float, node: str = "") -> None:
        if t < self.start:
            return
        self._placements += 1
        if utilisation > HOT:
            self.placed_on_hot += 1
            self._exceeded += 1
        else:
            self._pending.setdefault(node, []).append(t)

    def _judge(self, t: float, cpu: Sequence[float], names: Sequence[str]) -> None:
        """Placements whose node is hot at `t` exceeded; older than the window, not."""
        for name, u in zip(names, cpu, strict=True):
            times = self._pending.get(name)
            if times is None:
                continue
            fresh = [p for p in times if t - p <= EXCEEDANCE_WINDOW]
            if u > HOT:
                self._exceeded += len(fresh)
                fresh = []
            if fresh:
                self._pending[name] = fresh
            else:
                del self._pending[name]

    def waited(self, arrival: float, until: float, placed: bool = True) -> None:
        if placed:
            self._waits.append(until - arrival)
        self._wait_seconds += max(0.0, until - max(arrival, self.start))

    def metrics(
        self,
        unplaced: int,
        pods: int,
        moved: int = 0,
        peaks: Sequence[float] = (-1.0, -1.0, -1.0),
    ) -> Metrics:
        return Metrics(
            node_minutes_hot=self._hot_ticks * self.tick / 60,
            cpu_p95=percentile(self._cpu, 95),
            cpu_max=max(self._cpu, default=0.0),
            demand_p95=percentile(self._demand, 95),
            demand_max=max(self._demand, default=0.0),
            cpu_std=self._std_sum / self._ticks if self._ticks else 0.0,
            placed_on_hot=self.placed_on_hot,
            unplaced=unplaced,
            pods=pods,
            waited=len(self._waits),
            wait_p95=percentile(self._waits, 95) / 60,
            wait_max=max(self._waits, default=0.0) / 60,
            wait_minutes=self._wait_seconds / 60,
            moved=moved,
            peak_1sd=peaks[0],
            peak_2sd=peaks[1],
            peak_3sd=peaks[2],
            exceedance=self._exceeded / self._placements if self._placements else 0.0,
        )
