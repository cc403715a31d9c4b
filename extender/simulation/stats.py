"""What a run is judged by, measured tick by tick over the measured window.

Node CPU utilisation = (background + the real use of its pods) / cores. A node cannot run
more than its cores, so utilisation is capped at 100 %; the uncapped figure is the demand
(how far over its cores the node was asked to run), reported beside it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

HOT = 0.9
"""A node above this utilisation is hot (the shipped policy's filter threshold)."""


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
    """Node-minutes above 90 % CPU."""
    cpu_p95: float
    """Over nodes x ticks, capped utilisation."""
    cpu_max: float
    demand_p95: float
    """Over nodes x ticks, uncapped."""
    demand_max: float
    cpu_std: float
    """The standard deviation of utilisation across nodes, averaged over ticks."""
    placed_on_hot: int
    """Pods placed, in the measured window, on a node above 90 % at that moment."""
    unplaced: int
    """Pods still waiting for a node when the run ends."""
    pods: int
    """Pods that arrived during the run."""
    waited: int
    """Pods placed only after waiting (a retry found them a node)."""
    wait_p95: float = 0.0
    """Minutes the pods that waited waited, their p95 (0 when none waited)."""
    wait_max: float = 0.0
    """The longest of those waits, minutes."""


@dataclass(frozen=True, slots=True)
class Band:
    """Node CPU across nodes at one tick: for the plots."""

    t: float
    p50: float
    p95: float
    max: float
    demand_max: float
    """The highest uncapped demand: how far past its cores the worst node was asked to run."""


class Recorder:
    """Accumulates the measured window's ticks."""

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

    def record(self, t: float, cpu: Sequence[float], demand: Sequence[float]) -> None:
        """One tick: every present node's capped utilisation and demand."""
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

    def placed(self, t: float, utilisation: float) -> None:
        """A pod went to a node running at `utilisation` just before it."""
        if t >= self.start and utilisation > HOT:
            self.placed_on_hot += 1

    def metrics(self, unplaced: int, pods: int, waits: Sequence[float] = ()) -> Metrics:
        """`waits`: seconds each pod placed after waiting had waited since its arrival."""
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
            waited=len(waits),
            wait_p95=percentile(waits, 95) / 60,
            wait_max=max(waits, default=0.0) / 60,
        )
