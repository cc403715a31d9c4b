"""Headroom for one more pod: how many cores each node can take before its herd metric
crosses the filter threshold. The table's verdict is the same for every pod; whether a node
can take *this* pod is not (4 cores push an 8-core node at 60 % past 90 %, 0.1 core does
not), so the passing nodes are kept sorted by headroom: those too small for a pod are a
prefix, found in O(log nodes) and empty for most pods. Pure.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.decisions.model import NodeName
from extender.decisions.scoring import NodeEval
from extender.policy.policies import Policy


@dataclass(frozen=True, slots=True)
class FitRule:
    """Which metric a pod's expected use is added to, and its threshold."""

    metric: str
    index: int
    """The metric's place in the policy (in NodeEval.values)."""
    above: float

    @property
    def reason(self) -> str:
        """The filter reason of a node too small for the pod: a category (the scheduler
        groups nodes by exact text in FailedScheduling)."""
        return f"{self.over} with this pod"

    @property
    def over(self) -> str:
        """The filter reason of a node over the threshold (scoring.threshold_reason's)."""
        return f"decice: {self.metric} above {self.above:g}"


def fit_rule(policy: Policy) -> FitRule | None:
    """The policy's herd metric with its filter.above, or None (nothing to fit under)."""
    for i, m in enumerate(policy.metrics):
        if m.name == policy.herd_metric and m.filter is not None and m.filter.above is not None:
            return FitRule(m.name, i, m.filter.above)
    return None


class Headroom:
    """Passing nodes sorted by headroom (cores left under the threshold). Read-only once built:
    `with_changes` gives a new index, as tables are replaced rather than changed."""

    __slots__ = ("_by_node", "_cores", "_names", "_spare", "cluster_cores")

    def __init__(
        self,
        by_node: dict[NodeName, float],
        order: list[tuple[float, NodeName]],
        cluster_cores: float = 0.0,
    ) -> None:
        self._by_node = by_node
        # Two aligned lists, headroom ascending: a bisect on the floats and a slice of the
        # names answer too_small at C speed (a burst's big pods ask it of every node).
        self._cores = [r for r, _ in order]
        self._names = [n for _, n in order]
        self._spare = sum(r for r in self._cores if r > 0)
        self.cluster_cores = cluster_cores
        """Cores of every node with a size, passing or not (`spare`'s whole)."""

    @classmethod
    def of(cls, by_node: Mapping[NodeName, float], cluster_cores: float = 0.0) -> Headroom:
        return cls(dict(by_node), sorted((r, n) for n, r in by_node.items()), cluster_cores)

    @classmethod
    def index(cls, rule: FitRule, evals: Mapping[NodeName, NodeEval], sizes: Sizes) -> Headroom:
        """Every node of `evals` that has a headroom figure."""
        found = headroom_of(rule, evals, evals, sizes)
        total = sum(size for n in evals if (size := sizes.of(n)) is not None)
        return cls.of({n: r for n, r in found.items() if r is not None}, total)

    def spare(self) -> float:
        """The nodes' headroom added up, a share of the cluster's cores: how much room the
        cluster has, wherever it lies (0 when no node's size is known)."""
        return self._spare / self.cluster_cores if self.cluster_cores > 0 else 0.0

    def too_small(self, cores: float) -> list[NodeName]:
        """The indexed nodes with less headroom than `cores`."""
        return self._names[: bisect_left(self._cores, cores)]

    def most(self) -> float:
        """The largest headroom of any indexed node (0 when none is indexed)."""
        return self._cores[-1] if self._cores else 0.0

    def for_node(self, node: NodeName) -> float:
        """Cores `node` can take (infinite for a node not indexed: no value to judge by)."""
        return self._by_node.get(node, math.inf)

    def with_changes(self, changes: Mapping[NodeName, float | None]) -> Headroom:
        """A copy with these nodes' headroom changed (None: no longer indexed); the nodes'
        sizes are the same (PolicyTables.resize indexes anew)."""
        copy = Headroom.__new__(Headroom)
        copy._by_node, copy._cores, copy._names = (
            self._by_node.copy(),  # not dict(): that re-inserts every key once one was deleted
            list(self._cores),
            list(self._names),
        )
        copy._spare, copy.cluster_cores = self._spare, self.cluster_cores
        for node, new in changes.items():
            old = copy._by_node.pop(node, None)
            copy._spare += max(new or 0.0, 0.0) - max(old or 0.0, 0.0)
            if old is not None:
                i = bisect_left(copy._cores, old)
                while copy._names[i] != node:  # equal headroom: find this node among them
                    i += 1
                del copy._cores[i], copy._names[i]
            if new is not None:
                copy._by_node[node] = new
                i = bisect_right(copy._cores, new)
                copy._cores.insert(i, new)
                copy._names.insert(i, node)
        return copy

    def __len__(self) -> int:
        return len(self._by_node)


@dataclass(frozen=True, slots=True)
class Sizes:
    """The nodes' CPU cores, as the node watch reports them."""

    cores: Mapping[NodeName, float]
    default: float | None
    """For a node whose size is unknown (herdGuard.defaultNodeCores); None when a node watch
    tells sizes: a node it has not told of has no headroom figure, so no pod is turned away
    from it for want of headroom (the scheduler's resource checks stand)."""

    def of(self, node: NodeName) -> float | None:
        return self.cores.get(node) or self.default


def headroom_of(
    rule: FitRule, evals: Mapping[NodeName, NodeEval], nodes: Iterable[NodeName], sizes: Sizes
) -> dict[NodeName, float | None]:
    """node -> cores it can take before `rule`'s metric crosses its threshold, for `nodes`;
    None when not indexed (the filter rejects it anyway, or no value or size to judge by)."""
    out: dict[NodeName, float | None] = {}
    for n in nodes:
        e, size = evals[n], sizes.of(n)
        value = None if e.reason is not None else e.values[rule.index]
        out[n] = None if size is None or value is None else (rule.above - value) * size
    return out


def tight_nodes(
    headroom: Headroom, needs: float, names: Sequence[NodeName], failed: Mapping[NodeName, str]
) -> set[NodeName]:
    """The asked nodes (`names`) too small for a pod that needs `needs` cores, less those
    the filter rejects anyway."""
    small = headroom.too_small(needs)
    if not small:  # the common case: every node has headroom for this pod
        return set()
    tight = set(names).intersection(small)
    if failed:
        tight.difference_update(failed)
    return tight


def overflow_node(
    rule: FitRule,
    evals: Mapping[NodeName, NodeEval],
    candidates: Iterable[NodeName],
    sizes: Sizes,
    below_capacity: float | None = None,
) -> NodeName | None:
    """The node with the most headroom (cores under the threshold, negative above it) of
    `candidates`, for a pod that has waited `herdGuard.waitForRoom` for room on any node:
    rather than wait on, it goes where it does least harm. None when no candidate has a
    value of the herd metric to judge by. A node of unknown size counts as one core.
    `below_capacity`: only a node with that many cores left under 100 %."""
    best: tuple[float, NodeName] | None = None
    for n in candidates:
        e = evals.get(n)
        value = e.values[rule.index] if e is not None else None
        if value is None:
            continue
        size = sizes.of(n) or 1.0
        if below_capacity is not None and (1.0 - value) * size < below_capacity:
            continue
        room = (rule.above - value) * size
        if best is None or (room, n) > best:
            best = (room, n)
    return best[1] if best is not None else None
