"""One policy's view of the cluster during a rebalance check: the table's verdicts and
scores, with the moves planned so far (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from extender.decisions.headroom import fit_rule
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import (
    NodeEval,
    evaluate_node,
    has_candidates_metric,
    range_score,
    score_candidates,
)
from extender.decisions.table import Table
from extender.policy.policies import Policy


class NodeScores:
    """Nodes touched by a planned move are re-evaluated with the load it frees or adds
    (scoring.evaluate_node, the function that built the table)."""

    def __init__(
        self,
        policy: Policy,
        table: Table,
        snapshot: Snapshot,
        extra: Mapping[NodeName, float],
        now: float,
    ) -> None:
        self._policy = policy
        self._table = table
        self._snapshot = snapshot
        self._extra = extra  # node -> load the planned moves add (negative: free)
        self._now = now
        self._candidates = has_candidates_metric(policy)
        self._scores = self._score_all(table.evals)
        self._touched: dict[NodeName, tuple[str | None, int]] = {}
        self._evals: dict[NodeName, NodeEval] = {}  # of the touched nodes
        # Best first, ties by name (the table's own unless `candidates` metrics rescale).
        self._ranking = (
            sorted((-s, n) for n, s in self._scores.items() if n in table.ok)
            if self._candidates
            else table.ranking
        )

    def _score_all(self, evals: Mapping[NodeName, NodeEval]) -> dict[NodeName, int]:
        if not self._candidates:
            return dict(self._table.scores)
        # `candidates` metrics rescale over the nodes asked about: here, every passing node.
        names = [n for n in evals if n in self._table.ok]
        scores = score_candidates(self._policy, [evals[n] for n in names])
        return dict(zip(names, scores, strict=True))

    def touch(self, nodes: Iterable[NodeName]) -> None:
        """The load on these nodes changed: evaluate them again when asked."""
        table = self._table
        herd = {n: table.herd.get(n, 0.0) + self._extra.get(n, 0.0) for n in nodes}
        for n, load in herd.items():
            e = evaluate_node(self._policy, self._snapshot, n, table.stale, {n: load}, self._now)
            self._evals[n] = e
            if self._candidates:
                evals = {**table.evals, n: e}
                score = self._score_all(evals).get(n, 0)
            else:
                score = range_score(self._policy, e)
            self._touched[n] = (e.reason, score)

    def overshoot(self, node: NodeName) -> float | None:
        """How far the node's herd metric is over its threshold (moves included), or None."""
        room = self.headroom(node)
        return -room if room is not None and room < 0 else None

    def verdict(self, node: NodeName) -> tuple[str | None, int]:
        """(filter reason or None, score) of a node for this policy."""
        if node in self._touched:
            return self._touched[node]
        e = self._table.eval_of(node)
        score = self._scores.get(node, self._table.unknown_score)
        return e.reason, score

    def best(
        self, exclude: NodeName, fits: Callable[[NodeName], bool]
    ) -> tuple[NodeName, int] | None:
        """The passing node with the highest score that `fits` the pod (ties by name)."""
        found: tuple[int, NodeName] | None = None
        for n, (reason, score) in self._touched.items():
            if n == exclude or reason is not None or not fits(n):
                continue
            if found is None or (-score, n) < found:
                found = (-score, n)
        for neg, n in self._ranking:
            if found is not None and (neg, n) > found:
                break
            if n == exclude or n in self._touched or not fits(n):
                continue
            found = (neg, n)
            break
        return None if found is None else (found[1], -found[0])

    def headroom(self, node: NodeName) -> float | None:
        """The share of the node under its herd metric's threshold (moves included), or None."""
        rule = fit_rule(self._policy)
        if rule is None:
            return None
        e = self._evals.get(node) or self._table.eval_of(node)
        value = e.values[rule.index]
        return None if value is None else rule.above - value
