"""kube-scheduler's framework in the simulation: plugins, what they are fed, the defaults.

At each tick every plugin reads what the cluster's agents measured (`Feeds`) on its own
clock, and hears of every pod bound and gone, as its informer would.
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
    prometheus: MetricPipeline
    ledger: NodeLedger
    meter: PodMeter
    nodes: Mapping[str, NodeSpec]
    memory: Mapping[str, float]


class Plugin:
    """A framework plugin: a filter, a score, or both; the base does nothing."""

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        """A tick boundary, `t` seconds into the run (`now` on the engine's clock)."""

    def take_predictions(self) -> Mapping[str, tuple[float, float]]:
        """node -> (mean, spread) of a peak predictor, new since asked last."""
        return {}

    def filter(self, pod: PodSpec, nodes: list[NodeRequests], now: float) -> list[NodeRequests]:
        return nodes

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        """0..100 per node; None when every node scores the same (upstream's Skip)."""
        return None

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        """Reserve, or the informer seeing it bound."""

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod is gone from `node`."""


class RequestScores(Plugin):
    """LeastAllocated and BalancedAllocation: from requests only, so cached per pod shape."""

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

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        owner = pod.replicaset
        if not owner:
            return None
        counts = [n.owners.get(owner, 0) for n in nodes]
        if not any(counts):
            return None  # every node scores 100
        return spread_scores(counts)
