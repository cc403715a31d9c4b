"""Koordinator's LoadAwareScheduling, as koord-scheduler computes it.

Read, not copied, from koordinator-sh/koordinator (master, 2026-07), pkg/scheduler/:
- plugins/loadaware/estimator/default_estimator.go: max(request, limit) x factor, 250m/200Mi;
- plugins/loadaware/pod_assign_cache.go, helper.go: NodeUsage plus pods it may not show yet;
- plugins/loadaware/load_aware.go: Filter by usage thresholds, Score by least used;
- apis/config/v1/defaults.go: expiry 180 s, thresholds cpu 65 %/memory 95 %, factors 85/70 %;
- config/manager/scheduler-config.yaml (repository root): the profile, at the plugin's defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.simulation.framework import Feeds, Plugin
from extender.simulation.peers.koordlet import Koordlets, NodeMetric
from extender.simulation.upstream import NodeRequests, least_requested_score, round_half_away
from extender.simulation.workload import MIB, PodSpec

DEFAULT_MILLI_CPU = 250
DEFAULT_MEMORY = 200 * MIB
CPU_SCALING, MEMORY_SCALING = 85, 70
CPU_THRESHOLD, MEMORY_THRESHOLD = 65, 95
CPU_WEIGHT, MEMORY_WEIGHT = 1, 1
EXPIRATION = 180


def estimate(request: int, limit: int | None, factor: int, default: int) -> int:
    quantity = max(request, limit or 0)
    if quantity == 0:
        return default
    used = int(round_half_away(quantity * factor / 100))
    if limit is not None and 0 < limit < used:
        return limit
    return used


def estimate_pod(pod: PodSpec) -> tuple[int, int]:
    cpu = estimate(pod.cpu_milli, pod.cpu_limit_milli, CPU_SCALING, DEFAULT_MILLI_CPU)
    return cpu, estimate(pod.memory, None, MEMORY_SCALING, DEFAULT_MEMORY)


def load_aware_score(used: tuple[int, int], allocatable: tuple[int, int]) -> int:
    """leastUsedScore per resource: LeastAllocated's formula over use."""
    cpu = least_requested_score(used[0], allocatable[0]) * CPU_WEIGHT
    memory = least_requested_score(used[1], allocatable[1]) * MEMORY_WEIGHT
    return (cpu + memory) // (CPU_WEIGHT + MEMORY_WEIGHT)


def over_threshold(used: int, allocatable: int, threshold: int) -> bool:
    if threshold == 0 or allocatable == 0:
        return False
    return int(round_half_away(used / allocatable * 100)) > threshold


def expired(metric: NodeMetric, now: float) -> bool:
    return metric.update_time is None or now - metric.update_time >= EXPIRATION


@dataclass(slots=True)
class Assigned:
    at: float
    estimated: tuple[int, int]


class LoadAware(Plugin):
    def __init__(self) -> None:
        self.koordlets = Koordlets()
        self.assigned: dict[str, dict[str, Assigned]] = {}
        self._existing: dict[str, tuple[int, int]] = {}

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        if self.koordlets.observe(t, now, feeds.nodes, feeds.ledger, feeds.meter):
            self._existing.clear()

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        self.assigned.setdefault(node, {})[pod.uid] = Assigned(now, estimate_pod(pod))
        self._existing.pop(node, None)

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        self.assigned.get(node, {}).pop(pod.uid, None)
        self._existing.pop(node, None)

    def existing(self, node: str, metric: NodeMetric) -> tuple[int, int]:
        cached = self._existing.get(node)
        if cached is not None:
            return cached
        cpu, memory = metric.cpu_milli, metric.memory
        since = (metric.update_time or 0.0) - metric.report_interval
        for uid, pod in self.assigned.get(node, {}).items():
            own = metric.pods.get(uid)
            if own is None or since < pod.at:
                cpu += max(0, pod.estimated[0] - (own[0] if own else 0))
                memory += max(0, pod.estimated[1] - (own[1] if own else 0))
        self._existing[node] = (cpu, memory)
        return cpu, memory

    def _used(self, incoming: tuple[int, int], node: str, metric: NodeMetric) -> tuple[int, int]:
        cpu, memory = self.existing(node, metric)
        return cpu + incoming[0], memory + incoming[1]

    def filter(self, pod: PodSpec, nodes: list[NodeRequests], now: float) -> list[NodeRequests]:
        metrics = self.koordlets.metrics
        incoming = estimate_pod(pod)
        out = []
        for n in nodes:
            metric = metrics.get(n.name)
            if metric is None:
                out.append(n)  # NotFound: load-aware scheduling steps aside
                continue
            if expired(metric, now):
                continue
            cpu, memory = self._used(incoming, n.name, metric)
            hot = over_threshold(cpu, n.cpu, CPU_THRESHOLD)
            if not hot and not over_threshold(memory, n.memory, MEMORY_THRESHOLD):
                out.append(n)
        return out

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        metrics = self.koordlets.metrics
        incoming = estimate_pod(pod)
        out = []
        for n in nodes:
            metric = metrics.get(n.name)
            if metric is None or expired(metric, now):
                out.append(0)
                continue
            used = self._used(incoming, n.name, metric)
            out.append(load_aware_score(used, (n.cpu, n.memory)))
        return out
