"""The precomputed answer table, the request path's fast lane: per node, the filter verdict
and the serialised `{"Host","Score"}` fragment, so a request is lookups and byte joins."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from extender.decisions.headroom import Headroom, Sizes, fit_rule, headroom_of
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import NodeEval, evaluate_node, range_score, stale_metrics
from extender.decisions.wire import host_priority, join_priorities
from extender.policy.policies import Policy


@dataclass(slots=True, eq=False)
class WholeAnswer:
    """The HostPriorityList for a request about exactly the nodes the filter passes: these
    bytes, no lookup per name, no fragment for a score of 0. kube-scheduler reads the answer
    into a map by `Host` and gives a node missing from it 0 (kubernetes
    `pkg/scheduler/schedule_one.go`, `prioritizeNodes`), so order does not matter.
    Kept as chunks of CHUNK nodes, so a patch re-joins only the chunks it moved."""

    nodes: frozenset[NodeName]
    _order: Sequence[NodeName]  # shared by its patches
    _index: Mapping[NodeName, int]  # node -> its place in `_order`
    _chunks: list[bytes]
    _encoded: bytes | None = None

    @classmethod
    def of(
        cls,
        order: Sequence[NodeName],
        fragments: Mapping[NodeName, bytes],
        scores: Mapping[NodeName, int],
        ok: frozenset[NodeName],
    ) -> WholeAnswer:
        index = {n: i for i, n in enumerate(order)}
        chunks = [
            _chunk(order, start, fragments, scores, ok) for start in range(0, len(order), CHUNK)
        ]
        return cls(ok, order, index, chunks)

    def patched(
        self,
        moved: Iterable[NodeName],
        fragments: Mapping[NodeName, bytes],
        scores: Mapping[NodeName, int],
        ok: frozenset[NodeName],
    ) -> WholeAnswer:
        """The answer with the `moved` nodes' chunks joined again (a new node: all)."""
        index, order = self._index, self._order
        if any(n not in index for n in moved):
            order = [*order, *(n for n in dict.fromkeys(moved) if n not in index)]
            return WholeAnswer.of(order, fragments, scores, ok)
        chunks = list(self._chunks)
        for start in {index[n] // CHUNK * CHUNK for n in moved}:
            chunks[start // CHUNK] = _chunk(order, start, fragments, scores, ok)
        return WholeAnswer(ok, order, index, chunks)

    def encoded(self) -> bytes:
        """Joined on first use: a burst of binds patches once per pod, joins once."""
        if self._encoded is None:
            self._encoded = join_priorities(filter(None, self._chunks))
        return self._encoded


CHUNK = 64  # nodes per chunk of the whole answer


def _chunk(
    order: Sequence[NodeName],
    start: int,
    fragments: Mapping[NodeName, bytes],
    scores: Mapping[NodeName, int],
    ok: frozenset[NodeName],
) -> bytes:
    """The fragments of `order[start:start+CHUNK]` that pass and score above 0, joined."""
    return b",".join([fragments[n] for n in order[start : start + CHUNK] if n in ok and scores[n]])


class Fragments(dict[str, bytes]):
    """node -> serialised HostPriority; an unknown node's is made on demand, not stored."""

    __slots__ = ("score",)

    def __init__(self, items: Mapping[str, bytes], score: int) -> None:
        super().__init__(items)
        self.score = score

    def __missing__(self, key: str) -> bytes:
        return host_priority(key, self.score)


RESORT_ABOVE = 64
"""A patch of more nodes than this sorts the ranking again rather than move each one."""


@dataclass(frozen=True, slots=True)
class Table:
    stale: frozenset[str]
    evals: Mapping[NodeName, NodeEval]
    scores: Mapping[NodeName, int]
    fragments: Fragments  # range metrics' scores, serialised (candidates metrics are per request)
    whole: WholeAnswer
    reasons: Mapping[NodeName, str]  # nodes the filter rejects -> why
    ok: frozenset[NodeName]
    """Nodes the filter passes: one C-level `issuperset` answers the common case."""
    unknown: NodeEval  # the verdict for a node absent from the snapshot
    passes_all: bool  # no node is rejected, known or not: the filter skips the per-name lookups
    unknown_score: int
    herd: Mapping[NodeName, float]
    headroom: Headroom | None = None
    """The passing nodes by headroom (headroom.py); None without a fit rule or sizes."""
    ranking: Sequence[tuple[int, NodeName]] = ()
    """The passing nodes best first as (-score, name), kept in step by `patch_table`."""

    def eval_of(self, node: NodeName) -> NodeEval:
        return self.evals.get(node, self.unknown)

    def passes(self, node: NodeName) -> bool:
        """The filter passes `node` (a node absent from the snapshot as `unknown` says)."""
        return node in self.ok or (node not in self.evals and self.unknown.reason is None)


def build_table(
    policy: Policy,
    snapshot: Snapshot,
    stale: frozenset[str],
    herd: Mapping[NodeName, float],
    now: float,
    sizes: Sizes | None = None,
) -> Table:
    """Score every node in the snapshot, off the request path; `sizes` index the headroom."""
    nodes: set[NodeName] = set(herd)
    for series in snapshot.metrics.values():
        nodes.update(series.values)
    evals = {n: evaluate_node(policy, snapshot, n, stale, herd, now) for n in sorted(nodes)}
    unknown = evaluate_node(policy, snapshot, "", stale, {}, now)
    unknown_score = range_score(policy, unknown)
    reasons = {n: e.reason for n, e in evals.items() if e.reason is not None}
    scores = {n: range_score(policy, e) for n, e in evals.items()}
    fragments = Fragments({n: host_priority(n, s) for n, s in scores.items()}, unknown_score)
    ok = frozenset(n for n, e in evals.items() if e.reason is None)
    rule = fit_rule(policy)
    headroom = Headroom.index(rule, evals, sizes) if rule and sizes is not None else None
    return Table(
        stale=stale,
        evals=evals,
        scores=scores,
        fragments=fragments,
        whole=WholeAnswer.of(list(evals), fragments, scores, ok),
        reasons=reasons,
        ok=ok,
        unknown=unknown,
        passes_all=not reasons and unknown.reason is None,
        unknown_score=unknown_score,
        herd=dict(herd),
        headroom=headroom,
        ranking=_ranking(scores, ok),
    )


def _ranking(scores: Mapping[NodeName, int], ok: frozenset[NodeName]) -> list[tuple[int, str]]:
    return sorted((-s, n) for n, s in scores.items() if n in ok)


def patch_table(
    table: Table,
    policy: Policy,
    snapshot: Snapshot,
    herd: Mapping[NodeName, float],
    now: float,
    changed: Iterable[NodeName] | None = None,
    sizes: Sizes | None = None,
) -> Table:
    """The table with new herd load: only the `changed` nodes (else those whose load
    differs) re-scored, and their headroom re-indexed with `sizes`."""
    if changed is None:
        changed = {n for n in set(herd) | set(table.herd) if herd.get(n) != table.herd.get(n)}
    changed = tuple(changed)  # walked twice below
    if not changed:
        return table
    evals = dict(table.evals)
    for n in changed:
        evals[n] = evaluate_node(policy, snapshot, n, table.stale, herd, now)
    headroom, rule = table.headroom, fit_rule(policy)
    if headroom is not None and rule is not None and sizes is not None:
        headroom = headroom.with_changes(headroom_of(rule, evals, changed, sizes))
    # Most binds move a node's load within its score's step: then the maps and answers
    # stand and are not copied (each copy is O(nodes)).
    verdicts = {n: (range_score(policy, evals[n]), evals[n].reason) for n in changed}
    moved = [n for n in changed if (table.scores.get(n), table.reasons.get(n)) != verdicts[n]]
    if not moved:
        return replace(table, headroom=headroom, evals=evals, herd=dict(herd))
    scores = dict(table.scores)
    fragments = Fragments(table.fragments, table.unknown_score)
    for n in moved:
        scores[n] = verdicts[n][0]
        fragments[n] = host_priority(n, scores[n])
    # Copied only when a verdict changed: `ok` stays the same object, which
    # Engine.prioritize compares by identity to answer whole.
    reasons, passing = table.reasons, table.ok
    if any(reasons.get(n) != evals[n].reason for n in moved):
        changed_reasons = {n: evals[n].reason for n in moved}
        reasons = {n: r for n, r in {**reasons, **changed_reasons}.items() if r is not None}
    if any((n in passing) != (evals[n].reason is None) for n in moved):
        cleared = {n for n in moved if evals[n].reason is None}
        passing = passing.difference(moved).union(cleared)
    if len(moved) > RESORT_ABOVE:
        ranking = _ranking(scores, passing)
    else:  # a copy, then each changed node moved to its place: O(nodes) memmove at worst
        ranking = list(table.ranking)
        for n in moved:
            if n in table.ok:
                del ranking[bisect_left(ranking, (-table.scores[n], n))]
            if n in passing:
                insort(ranking, (-scores[n], n))
    return replace(
        table,
        headroom=headroom,
        ranking=ranking,
        evals=evals,
        scores=scores,
        fragments=fragments,
        whole=table.whole.patched(moved, fragments, scores, passing),
        reasons=reasons,
        ok=passing,
        passes_all=not reasons and table.unknown.reason is None,
        herd=dict(herd),
    )


class PolicyTables:
    """Each policy's table for the snapshot in force: rebuilt when one of its metrics
    crosses its maxAge, patched node by node when the herd load changes."""

    def __init__(self, tables: dict[str, Table], sizes: Sizes | None = None) -> None:
        self._tables = tables
        self.sizes = sizes  # the nodes' cores the headroom indexes are built with

    def resize(self, policies: Iterable[Policy], sizes: Sizes) -> None:
        """The nodes' cores changed: the headroom indexes follow (scores are shares)."""
        self.sizes = sizes
        for policy in policies:
            table = self._tables.get(policy.name)
            rule = fit_rule(policy)
            if table is None or rule is None:
                continue
            # Rebuilt whole (2 ms at 5,000 nodes; sizes change as nodes join or resize):
            # the cluster's cores, spareRoom's whole, move with them.
            headroom = Headroom.index(rule, table.evals, sizes)
            self._tables[policy.name] = replace(table, headroom=headroom)

    def replace(
        self,
        policies: Mapping[str, Policy],
        snapshot: Snapshot,
        given: Mapping[str, Table],
        herd: Mapping[NodeName, float],
        now: float,
    ) -> None:
        """A new snapshot's tables: each `given` one (built off the loop) if still right."""
        out: dict[str, Table] = {}
        for name, policy in policies.items():
            table = given.get(name)
            stale = stale_metrics(policy, snapshot, now)
            if (
                table is None
                or table.stale != stale
                or (table.headroom is None) != (self.sizes is None or fit_rule(policy) is None)
            ):
                table = build_table(policy, snapshot, stale, herd, now, self.sizes)
            out[name] = patch_table(table, policy, snapshot, herd, now, sizes=self.sizes)
        self._tables = out

    def current(
        self, policy: Policy, snapshot: Snapshot, herd: Mapping[NodeName, float], now: float
    ) -> Table:
        """The policy's table, rebuilt first when its stale metrics changed."""
        table = self._tables[policy.name]
        stale = stale_metrics(policy, snapshot, now)
        if stale != table.stale:
            table = build_table(policy, snapshot, stale, dict(herd), now, self.sizes)
            self._tables[policy.name] = table
        return table

    def patch(
        self,
        policies: Iterable[Policy],
        node: NodeName,
        snapshot: Snapshot,
        herd: Mapping[NodeName, float],
        now: float,
    ) -> None:
        """One node's load changed: re-score that node only (a burst binds one pod at a
        time), in the policies whose score it moves."""
        for policy in policies:
            if policy.herd_metric is not None:
                table = self.current(policy, snapshot, herd, now)
                self._tables[policy.name] = patch_table(
                    table, policy, snapshot, herd, now, changed=(node,), sizes=self.sizes
                )
