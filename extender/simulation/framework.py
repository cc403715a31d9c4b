"""kube-scheduler's framework in the simulation: plugins, what they are fed, the defaults.

A scheduler here is a profile: kube-scheduler's scheduling cycle (scheduler.py) with a list
of filter plugins, of score plugins with their weights, and at most one extender. Every
plugin is told at each tick what the cluster's agents measured so far (`Feeds`) and reads
what it really reads, on its own clock: our extender Prometheus through our refresher,
Trimaran load-watcher, Koordinator the koordlet's NodeMetric. A plugin also hears of every
pod bound and every pod gone, as its informer would.

The default score plugins that differ between simulated nodes are here, computed by
upstream.py: NodeResourcesFit's LeastAllocated and NodeResourcesBalancedAllocation (from
requests), and PodTopologySpread (the pod's ReplicaSet siblings per node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.prometheus import MetricPipeline
from extender.simulation.upstream import (
    BALANCED_WEIGHT,
    FIT_WEIGHT,
    NodeRequests,
    balanced_allocation,
    least_allocated,
    spread_scores,
)
from extender.simulation.workload import NodeSpec, PodSpec


@dataclass(frozen=True, slots=True)
class Feeds:
    """What the cluster's agents have measured so far; each plugin reads its own."""

    prometheus: MetricPipeline
    ledger: NodeLedger
    meter: PodMeter
    nodes: Mapping[str, NodeSpec]
    """The nodes that have joined, by name."""
    memory: Mapping[str, float]
    """node -> memory utilisation now (the pods' memory use over its allocatable)."""


class Plugin:
    """A framework plugin: a filter, a score, or both; the base does nothing."""

    name = "plugin"
    filters = False

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        """A tick boundary at `t` seconds into the run (`now` on the engine's clock)."""

    def take_predictions(self) -> Mapping[str, tuple[float, float]]:
        """node -> (mean, spread) of a peak predictor, new since asked last (none here)."""
        return {}

    def filter(self, pod: PodSpec, nodes: list[NodeRequests], now: float) -> list[NodeRequests]:
        return nodes

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        """0..100 per node, aligned with `nodes`; None when it gives every node the same
        score (upstream's Skip), which moves no decision."""
        return None

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod was bound to `node` (Reserve, or the informer seeing it assigned)."""

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod is gone from `node`."""


class RequestScores(Plugin):
    """NodeResourcesFit's score (LeastAllocated) and NodeResourcesBalancedAllocation, with
    their weights, in one plugin: both read only requests, so a node's sum is cached per pod
    shape until the node changes."""

    name = "NodeResourcesFit+NodeResourcesBalancedAllocation"

    def __init__(self, fit: int = FIT_WEIGHT, balanced: int = BALANCED_WEIGHT) -> None:
        self.fit = fit
        self.balanced = balanced

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        cpu, memory = pod.cpu_milli, pod.memory
        key = (self.fit, self.balanced, cpu, memory)
        out = []
        for n in nodes:
            value = n.memo.get(key)
            if value is None:
                value = least_allocated(n, cpu, memory) * self.fit
                value += balanced_allocation(n, cpu, memory) * self.balanced
                n.memo[key] = value
            out.append(value)
        return out


class PodTopologySpread(Plugin):
    """The system default spreading of a ReplicaSet's pods across hosts."""

    name = "PodTopologySpread"

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        owner = pod.replicaset
        if not owner:
            return None
        counts = [n.owners.get(owner, 0) for n in nodes]
        if not any(counts):
            return None  # every node scores 100
        return spread_scores(counts)
