"""Decisions for the verbs: filter, prioritize, preempt, from the current table.

The engine decides; wire.py encodes its decisions (model.FilterDecision, Priorities).

The engine owns the mutable state of the request path (snapshot, tables, the herd
guard's ledger, pod memory). It does no I/O and runs on the event loop only, so it
needs no locks: the refresher builds tables in a thread and installs them here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from itertools import filterfalse

from extender.decisions.guard import HerdGuard
from extender.decisions.herd import Reservation
from extender.decisions.model import (
    FilterDecision,
    NodeInventory,
    NodeName,
    Priorities,
    Snapshot,
)
from extender.decisions.nodes import remap_nodes
from extender.decisions.pods import CANDIDATES_KEPT_UP_TO, PodFacts, PodMemo, PodMemory, shown
from extender.decisions.preemption import passing_after_victims
from extender.decisions.readiness import readiness
from extender.decisions.scoring import (
    has_candidates_metric,
    score_candidates,
    stale_metrics,
    tie_start,
    top_hosts,
)
from extender.decisions.table import PolicyTables, Table, build_table
from extender.decisions.turnedaway import TurnedAway, TurnedAwayPods
from extender.decisions.wire import NO_SCORES, ExtenderArgs, PreemptionArgs
from extender.policy.policies import Policy
from extender.policy.settings import Settings

UNKNOWN_POLICY = 'decice: unknown policy "{}"'
"""The filter reason on every node for a pod naming a policy that does not exist: it
surfaces in the pod's FailedScheduling event (one entry, the text is the same)."""


class Engine:
    def __init__(
        self,
        settings: Settings,
        snapshot: Snapshot,
        now: float,
        turned_away: TurnedAwayPods | None = None,
    ) -> None:
        self.guard = HerdGuard(settings)
        self._herd = self.guard.ledger
        self.settings = settings
        self.pods = PodMemory(settings.explain.keep_pods)
        self.turned_away = turned_away
        """Pods turned away from every node, when someone (cluster.requeue) acts on them."""
        self._snapshot = snapshot
        self._tables = PolicyTables(build_tables(settings, snapshot, {}, now))

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        # Resolved once per install: Settings' derived policies are slow to read per request.
        self._settings = settings
        self.policies: Mapping[str, Policy] = settings.policy_map
        self._default: Policy = settings.default
        self.guard.configure(settings)

    def herd(self) -> dict[NodeName, float]:
        return dict(self._herd.load)

    def install(
        self,
        snapshot: Snapshot,
        tables: Mapping[str, Table] | None,
        now: float,
        settings: Settings | None = None,
    ) -> None:
        """Swap in a snapshot (its tables built off the loop) and, on a reload, `settings`, in
        one step: no verb awaits between reading a table and answering, so a request is
        decided wholly on the old tables or wholly on the new."""
        if settings is not None:
            self.settings = settings
        self.guard.install(snapshot)
        self._snapshot = snapshot
        self._tables.replace(self.policies, snapshot, tables or {}, self.herd(), now)

    def set_node_cores(self, cores: Mapping[NodeName, float]) -> None:
        self._herd.set_node_cores(cores)

    def policy_of(self, pod: PodFacts) -> Policy | None:
        """The policy the pod asks for (decice.io/policy), else the default; None when it
        names one that does not exist."""
        if pod.policy is None:
            return self._default
        return self.policies.get(pod.policy)

    def table(self, now: float, policy: Policy | None = None) -> Table:
        """The policy's current table (the default policy's when None); rebuilt only when
        one of its metrics crosses its maxAge."""
        return self._tables.current(policy or self._default, self._snapshot, self._herd.load, now)

    def answered_nodes(self, now: float) -> Callable[[PodFacts], frozenset[NodeName]]:
        """For wire.parse_extender_args: the nodes of the precomputed prioritize answer of
        the pod's policy (none for a pod that is not ours or names no known policy)."""

        def nodes(pod: PodFacts) -> frozenset[NodeName]:
            policy = self.policy_of(pod) if self.is_ours(pod) else None
            return self.table(now, policy).whole.nodes if policy is not None else frozenset()

        return nodes

    def reserve(
        self,
        uid: str,
        node: NodeName,
        cores: float | None,
        now: float,
        source: str = "bind",
        *,
        pod: PodFacts | None = None,
        assigned_at: float | None = None,
    ) -> bool:
        """Herd guard: count a placed pod on its node until the metric shows it (guard.py),
        once per UID, told by our "bind" or the pod "watch". Its expected use comes from
        `pod` (the watch's reading), else our filter call's, else the request `cores`."""
        memo = self.pods.get(uid) if pod is None else None
        facts = pod or (memo.facts if memo is not None else PodFacts(uid, "", "", "", cores))
        expectation = self.guard.reserve(uid, node, facts, self._snapshot, now, source, assigned_at)
        if expectation is None:
            return False
        self.pods.expect(uid, str(expectation))
        self._patch(node, now)
        return True

    def release(self, uid: str, now: float) -> bool:
        """The pod was deleted or finished: what it reserved is free again."""
        node = self._herd.release(uid)
        if node is None:
            return False
        self._patch(node, now)
        return True

    def _patch(self, node: NodeName, now: float) -> None:
        self._tables.patch(self.policies.values(), node, self._snapshot, self._herd.load, now)

    def recovered(self, now: float) -> list[TurnedAway]:
        """Turned-away pods with a candidate node the current table passes (forgotten here).

        Judged by the default policy's table: turned-away pods do not keep their policy,
        and a pod of another policy that still fails is simply turned away again."""
        if self.turned_away is None or not len(self.turned_away):
            return []
        table = self.table(now)
        return self.turned_away.recovered(table.passes, table.ok, now)

    @property
    def reservations(self) -> Mapping[str, Reservation]:
        return self._herd.reservations

    def is_ours(self, pod: PodFacts) -> bool:
        return pod.scheduler_name in self.settings.scheduler_names

    # -- verbs ---------------------------------------------------------------------------------

    def filter(self, args: ExtenderArgs, now: float) -> FilterDecision:
        if not self.is_ours(args.pod):
            return FilterDecision(failed={})
        names = args.names
        policy = self.policy_of(args.pod)
        if policy is None:
            reason = UNKNOWN_POLICY.format(shown(args.pod.policy or ""))
            self.pods.remember(_memo(args, None, None, frozenset(names), self._snapshot, now))
            return FilterDecision(failed=dict.fromkeys(names, reason))
        table = self.table(now, policy)
        failed = _rejected(table, names)
        self.pods.remember(_memo(args, policy, table, frozenset(failed), self._snapshot, now))
        if self.turned_away is not None:
            _track(self.turned_away, args.pod, names, len(failed), table, now)
        return FilterDecision(failed=failed)

    def prioritize(self, args: ExtenderArgs, now: float) -> Priorities:
        names = args.names
        policy = self.policy_of(args.pod) if self.is_ours(args.pod) else None
        if policy is None:  # not ours, or an unknown policy (the filter rejected it)
            return Priorities(names, whole=NO_SCORES)
        table = self.table(now, policy)
        if self.pods.get(args.pod.uid) is None:  # no filterVerb: remember it here
            self.pods.remember(_memo(args, policy, table, frozenset(), self._snapshot, now))
        max_hosts = self.settings.prioritize.max_hosts
        if has_candidates_metric(policy) or (max_hosts is not None and len(names) > max_hosts):
            return _scored(policy, table, args, max_hosts)
        if args.exactly is table.whole.nodes:  # the common case: see table.WholeAnswer
            return Priorities(names, whole=table.whole.encoded())
        return Priorities(names, fragments=table.fragments)

    def preempt(self, args: PreemptionArgs, now: float) -> Mapping[str, object]:
        """Keep the scheduler's victims exactly, for the nodes our filter would pass once
        the victims are gone (decisions.preemption)."""
        if not self.is_ours(args.pod):
            return args.victims
        policy = self.policy_of(args.pod)
        if policy is None:
            return {}
        table = self.table(now, policy)
        cores = self.guard.expected(args.pod, self._snapshot, now).cores
        return passing_after_victims(
            policy, table, self._snapshot, self._herd, args.victims, cores, now
        )

    def readiness(self, now: float) -> tuple[bool, dict[str, object]]:
        """Ready when every fail-closed metric has fresh values (fail-open ones always serve)."""
        return readiness(
            self.policies.values(), self._snapshot, lambda p: self.table(now, p).stale, now
        )

    def nodes_changed(
        self, inventory: NodeInventory, removed: Collection[NodeName], now: float
    ) -> None:
        """The node cache changed (the node watch), told at once, not at the next refresh:
        node sizes, addresses (nodes.remap_nodes) and removed nodes, whose reservations
        and table rows go."""
        gone = frozenset(removed)
        for node in gone:
            self._herd.drop_node(node)
        before = dict(self._herd.load)
        self._herd.set_node_cores(inventory.cpu_cores)
        snapshot = remap_nodes(self._snapshot, inventory, gone)
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self._tables.replace(self.policies, snapshot, {}, self.herd(), now)
            return
        after = self._herd.load
        for node in {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}:
            self._patch(node, now)


def node_figures(
    engine: Engine, now: float
) -> tuple[dict[str, dict[NodeName, int]], dict[str, dict[str, float]]]:
    """(policy -> node -> score, metric -> node -> value) for dashboards: the tables in
    force."""
    values = {name: dict(series.values) for name, series in engine.snapshot.metrics.items()}
    scores = {name: dict(engine.table(now, p).scores) for name, p in engine.policies.items()}
    return scores, values


def build_tables(
    settings: Settings,
    snapshot: Snapshot,
    herd: Mapping[NodeName, float],
    now: float,
) -> dict[str, Table]:
    """policy -> its table for `snapshot`: O(policies x nodes x metrics), off the request
    path (the refresher and a reload run it in a thread)."""
    return {
        name: build_table(policy, snapshot, stale_metrics(policy, snapshot, now), herd, now)
        for name, policy in settings.policy_map.items()
    }


def _memo(
    args: ExtenderArgs,
    policy: Policy | None,
    table: Table | None,
    rejected: frozenset[str],
    snapshot: Snapshot,
    now: float,
) -> PodMemo:
    """What was decided, for the bind guard and /explain: references, no copies of the big
    request (O(1) on the request path)."""
    names = args.names
    small = len(names) <= CANDIDATES_KEPT_UP_TO
    return PodMemo(
        facts=args.pod,
        rejected=rejected,
        candidates=tuple(names) if small else None,
        asked=len(names),
        at=now,
        snapshot=snapshot,
        stale=table.stale if table is not None else frozenset(),
        herd=table.herd if table is not None else {},
        policy=policy,
    )


def _track(
    turned_away: TurnedAwayPods,
    pod: PodFacts,
    names: list[str],
    failed: int,
    table: Table,
    now: float,
) -> None:
    """A pod our filter turned away from every node is remembered for the requeue; one
    that passed a node is not (any more)."""
    if names and failed == len(names):
        turned_away.remember(pod.uid, pod.namespace, pod.name, names, now, table.evals.keys())
    else:
        turned_away.forget(pod.uid)


def _scored(policy: Policy, table: Table, args: ExtenderArgs, max_hosts: int | None) -> Priorities:
    """Prioritize's answer scored for this request: metrics normalised over its own
    candidates, or only the best `max_hosts` of its nodes."""
    names = args.names
    if has_candidates_metric(policy):
        scores = score_candidates(policy, [table.eval_of(n) for n in names])
    else:
        scores = [table.scores.get(n, table.unknown_score) for n in names]
    if not max_hosts:
        return Priorities(names, scores=scores)
    keep = top_hosts(names, scores, max_hosts, tie_start(args.pod.uid, len(names)))
    return Priorities([names[i] for i in keep], scores=[scores[i] for i in keep])


def _rejected(table: Table, names: list[str]) -> dict[str, str]:
    """node -> reason for the nodes of this request that the filter rejects."""
    # The request path's fast lane, kept here in one place. Hashing 5,000 fresh name strings
    # costs about as much as parsing them (BENCHMARKS.md, "In-process costs the code
    # cites"), so when the table rejects no node at all (the healthy common case) there is
    # nothing to look up.
    if table.passes_all:
        return {}
    # Else: every node known and passing, one C-level set check.
    if table.ok.issuperset(names):
        return {}
    failed: dict[str, str] = {}
    for n in filterfalse(table.ok.__contains__, names):
        reason = table.reasons.get(n) if n in table.evals else table.unknown.reason
        if reason is not None:
            failed[n] = reason
    return failed
