"""load-watcher's Prometheus provider and Trimaran's collector, as their sources compute.

Read, not copied, from paypal/load-watcher (master, 2024-12):

- pkg/watcher/internal/metricsprovider/prometheus.go: for every host, instant queries
  `avg_over_time(instance:node_cpu:ratio[15m])` and `stddev_over_time(...)` (and the same
  for `instance:node_memory_utilisation:ratio`), each value x 100, keyed by the series'
  `instance` label. `instance:node_cpu:ratio` is kube-prometheus' node recording rule, a
  5-minute rate of node_cpu_seconds_total, so the scheduler sees a 15-minute average of a
  5-minute rate. (Its `instance` is node-exporter's address unless relabelled to the node
  name; the model assumes it is, else Trimaran would see no node at all.)
- pkg/watcher/watcher.go: the 15-minute window is fetched once at start and then every
  minute (`time.Sleep(time.Minute)`); Window.End is the fetch time.

and from kubernetes-sigs/scheduler-plugins (master, 2026-08): pkg/trimaran/collector.go
(library mode: the plugin copies the watcher's latest fetch every
metricsUpdateIntervalSeconds = 30 s).

All clocks are aligned at 0 like the rest of the simulation: the fewest seconds of lag a
real cluster could show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extender.simulation.prometheus import Evaluation, MetricPipeline

FETCH_EVERY = 60
WINDOW = 900
COLLECT_EVERY = 30


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One host's figures of a fetch, in percent (0..100) as load-watcher reports them."""

    cpu_avg: float
    cpu_std: float
    memory_avg: float
    memory_std: float


@dataclass(frozen=True, slots=True)
class WatcherMetrics:
    window_end: int
    """Unix seconds of the fetch."""
    hosts: Mapping[str, NodeLoad] = field(default_factory=dict)


def window_stats(evaluations: Sequence[Evaluation], end: float) -> NodeLoad | None:
    """avg_over_time and stddev_over_time (population) over (end - WINDOW, end], x 100."""
    inside = [e for e in evaluations if end - WINDOW < e[0] <= end]
    if not inside:
        return None
    cpu = [e[1] for e in inside]
    memory = [e[2] for e in inside]
    return NodeLoad(100 * _mean(cpu), 100 * _std(cpu), 100 * _mean(memory), 100 * _std(memory))


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _std(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


class LoadWatcher:
    """The watcher's latest 15-minute fetch, and the collector's copy the plugin reads."""

    def __init__(self) -> None:
        self.latest: WatcherMetrics | None = None
        self.collected: WatcherMetrics | None = None
        """What the plugin sees (None before the collector's first copy)."""

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
