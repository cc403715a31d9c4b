"""load-watcher's Prometheus provider and Trimaran's collector, as their sources compute.

- paypal/load-watcher pkg/watcher/internal/metricsprovider/prometheus.go: avg and stddev
  of `instance:node_cpu:ratio` over 15m, x 100; pkg/watcher/watcher.go: every minute;
- kubernetes-sigs/scheduler-plugins pkg/trimaran/collector.go: the latest, every 30 s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.simulation.prometheus import Evaluation, MetricPipeline
from extender.simulation.stats import pstdev

FETCH_EVERY = 60
WINDOW = 900
COLLECT_EVERY = 30


@dataclass(frozen=True, slots=True)
class NodeLoad:
    cpu_avg: float
    cpu_std: float
    memory_avg: float
    memory_std: float


@dataclass(frozen=True, slots=True)
class WatcherMetrics:
    window_end: int
    hosts: Mapping[str, NodeLoad] = field(default_factory=dict)


def window_stats(evaluations: Sequence[Evaluation], end: float) -> NodeLoad | None:
    """avg_over_time and stddev_over_time (population) over (end - WINDOW, end], x 100."""
    inside = [e for e in evaluations if end - WINDOW < e[0] <= end]
    if not inside:
        return None
    cpu = [e[1] for e in inside]
    memory = [e[2] for e in inside]
    cpu_mean, memory_mean = sum(cpu) / len(cpu), sum(memory) / len(memory)
    return NodeLoad(100 * cpu_mean, 100 * pstdev(cpu), 100 * memory_mean, 100 * pstdev(memory))


class LoadWatcher:
    def __init__(self) -> None:
        self.latest: WatcherMetrics | None = None
        self.collected: WatcherMetrics | None = None

    def observe(
        self, t: float, now: float, prometheus: MetricPipeline, nodes: Sequence[str]
    ) -> None:
        if t % FETCH_EVERY == 0:
            hosts = {}
            for node in nodes:
                load = window_stats(prometheus.history(node), t)
                if load is not None:
                    hosts[node] = load
            self.latest = WatcherMetrics(math.floor(now), hosts)
        if t % COLLECT_EVERY == 0 and self.latest is not None:
            self.collected = self.latest
