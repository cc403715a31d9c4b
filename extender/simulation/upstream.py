"""kube-scheduler's default filter and scores from requests, computed as upstream does.

Read, not copied, from kubernetes/kubernetes v1.35, pkg/scheduler/:
- framework/plugins/noderesources/fit.go: the NodeResourcesFit filter, LeastAllocated score;
- framework/plugins/noderesources/least_allocated.go: (allocatable - requested) x 100 / it;
- framework/plugins/noderesources/balanced_allocation.go: (1 - |cpu - memory| / 2) x 100;
- framework/plugins/noderesources/resource_allocation.go: the pod placed counts as requested;
- apis/config/v1/default_plugins.go: weights Fit 1, BalancedAllocation 1, PodTopologySpread 2;
- schedule_one.go: prioritizeNodes (an extender's score x weight x 10) and selectHost;
- framework/plugins/podtopologyspread/scoring.go: by hostname only, maxSkew 3.
Every node is scored (`percentageOfNodesToScore: 100`, as DESIGN §7 measured).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from extender.simulation.workload import MAX_PODS

MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10
FIT_WEIGHT = 1
BALANCED_WEIGHT = 1
SPREAD_WEIGHT = 2
HOSTNAME_MAX_SKEW = 3
RESOURCE_WEIGHTS = (1, 1)  # LeastAllocated's weights for (cpu, memory)


@dataclass(slots=True)
class NodeRequests:
    """The scheduler's cache of a node: allocatable (millicores, bytes), requests summed."""

    name: str
    cpu: int
    memory: int
    max_pods: int = MAX_PODS
    cpu_requested: int = 0
    memory_requested: int = 0
    pods: int = 0
    owners: dict[str, int] = field(default_factory=dict)
    """ReplicaSet -> its pods on the node (what PodTopologySpread counts)."""
    memo: dict[tuple[int, ...], int] = field(default_factory=dict)
    """What plugins computed from this node's requests, emptied on every change."""

    def add(self, cpu: int, memory: int, owner: str = "", sign: int = 1) -> None:
        """A pod counted in (`sign` 1) or out (-1)."""
        self.cpu_requested += sign * cpu
        self.memory_requested += sign * memory
        self.pods += sign
        self.memo.clear()
        if owner:
            self.owners[owner] = self.owners.get(owner, 0) + sign
            if not self.owners[owner]:
                del self.owners[owner]


def fitting_nodes(nodes: Iterable[NodeRequests], cpu: int, memory: int) -> list[NodeRequests]:
    """The nodes NodeResourcesFit's filter passes, in order."""
    if cpu == 0 and memory == 0:
        return [n for n in nodes if n.pods < n.max_pods]
    return [
        n
        for n in nodes
        if n.pods < n.max_pods
        and n.cpu - n.cpu_requested >= cpu
        and n.memory - n.memory_requested >= memory
    ]


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_allocated(node: NodeRequests, cpu: int, memory: int) -> int:
    """NodeResourcesFit's score (LeastAllocated), 0..100, the pod included."""
    total = weights = 0
    pairs = ((node.cpu_requested + cpu, node.cpu), (node.memory_requested + memory, node.memory))
    for (requested, allocatable), weight in zip(pairs, RESOURCE_WEIGHTS, strict=True):
        if allocatable == 0:
            continue
        total += least_requested_score(requested, allocatable) * weight
        weights += weight
    return total // weights if weights else 0


def balanced_allocation(node: NodeRequests, cpu: int, memory: int) -> int:
    """BalancedAllocation's score, the pod included (0 if it requests nothing: skipped)."""
    if cpu == 0 and memory == 0:
        return 0
    fractions = [
        min(requested / allocatable, 1.0)
        for requested, allocatable in (
            (node.cpu_requested + cpu, node.cpu),
            (node.memory_requested + memory, node.memory),
        )
        if allocatable != 0
    ]
    std = abs((fractions[0] - fractions[1]) / 2) if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def spread_scores(counts: Sequence[int], max_skew: int = HOSTNAME_MAX_SKEW) -> list[int]:
    """PodTopologySpread's normalised scores from each node's count of the ReplicaSet's pods."""
    weight = math.log(len(counts) + 2)
    skew = max_skew - 1
    raw = [math.floor(c * weight + skew + 0.5) if c else skew for c in counts]
    top, low = max(raw, default=0), min(raw, default=0)
    if top == 0:
        return [MAX_NODE_SCORE] * len(raw)
    return [MAX_NODE_SCORE * (top + low - r) // top for r in raw]


def round_half_away(x: float) -> float:
    """Go's math.Round: halves away from zero (Python's round takes halves to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def extender_points(score: int, weight: int) -> int:
    """What an extender's 0..10 score adds to a node's total."""
    return score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)


def select_host(scored: Sequence[tuple[str, int]], rng: random.Random) -> str:
    """selectHost: the highest total, ties by reservoir sampling on the seeded RNG."""
    if not scored:
        raise ValueError("empty priority list")
    selected, best = scored[0]
    tied = 1
    for name, score in scored[1:]:
        if score > best:
            selected, best, tied = name, score, 1
        elif score == best:
            tied += 1
            if rng.randrange(tied) == 0:
                selected = name
    return selected
