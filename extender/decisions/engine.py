"""The verbs' decisions (filter, prioritize, preempt) from the current table, over
state.DecisionState; wire.py encodes them. No I/O: it runs on the event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from itertools import filterfalse

from extender.decisions.estimate import MEASURED
from extender.decisions.headroom import fit_rule
from extender.decisions.held import HeldPods
from extender.decisions.herd import data_time, unshown_share
from extender.decisions.model import FilterDecision, NodeName, Priorities, Snapshot
from extender.decisions.pods import CANDIDATES_KEPT_UP_TO, PodFacts, PodMemo, api_time, shown
from extender.decisions.preemption import passing_after_victims
from extender.decisions.scoring import has_candidates_metric, score_candidates, tie_start, top_hosts
from extender.decisions.shortlist import shortlist, shortlist_size
from extender.decisions.state import NOMINATED
from extender.decisions.table import Table
from extender.decisions.wire import NO_SCORES, ExtenderArgs, PreemptionArgs
from extender.policy.policies import Policy

UNKNOWN_POLICY = 'decice: unknown policy "{}"'
"""The filter reason on every node for a pod naming no policy of ours (FailedScheduling)."""


class Engine(HeldPods):
    """The verbs' decisions over the state (state.DecisionState, held.HeldPods) they read."""

    def filter(self, args: ExtenderArgs, now: float) -> FilterDecision:
        if not self.is_ours(args.pod):
            return FilterDecision(failed={})
        self.expire_tentative(now)
        self.unexpect(args.pod.uid, now)  # scheduled again: not where we expected it
        names = args.names
        policy = self.policy_of(args.pod)
        if policy is None:
            reason = UNKNOWN_POLICY.format(shown(args.pod.policy or ""))
            self.pods.remember(_memo(args, None, None, frozenset(names), self._snapshot, now))
            return FilterDecision(failed=dict.fromkeys(names, reason))
        table = self.table(now, policy)
        failed = _rejected(table, names)
        cleared = self._cleared_for_preemptor(policy, args.pod, now)
        if cleared:
            failed = {n: r for n, r in failed.items() if n not in cleared}
        tight, needs = self.guard.fit(policy, table, args.pod, names, failed, self._snapshot, now)
        if cleared and tight:
            tight = tight - cleared
        if tight:
            # Unresolvable: kube-scheduler's preemption (SelectVictimsOnNode) runs its own
            # Filter plugins only and finds no victim here (tests/e2e/test_recent_preemption.py).
            reason = fit_rule(policy).reason  # type: ignore[union-attr]
            failed = {**failed, **dict.fromkeys(tight, reason)}
        rejected = frozenset(failed)
        since = overflow = None
        if rejected and rejected.issuperset(names):  # it fits on no node: it waits for room
            since = _waiting_since(self.pods.get(args.pod.uid), args.pod, now)
            guard = self.settings.herd_guard
            waited = now - since >= guard.wait_for_room
            if waited or _spread_thin(table, tight, guard.spare_room):
                below = None if waited else needs  # never past a node's capacity, unwaited
                overflow = self.guard.overflow(
                    policy, table, failed, self._snapshot, self.sizes, now, below
                )
            if overflow is not None:  # least harm; counted there at once: a backlog spreads
                failed = {n: r for n, r in failed.items() if n != overflow}
                rejected = rejected - {overflow}
        passed = None
        if since is None and not cleared:
            passed = self._shortlisted(table, args, len(rejected), tight)
            if passed is not None and len(passed) == 1 and self.expecting:
                self.expect(args.pod.uid, passed[0], args.pod, now)
        shortlisted = len(passed) if passed is not None else None
        self.pods.remember(
            _memo(args, policy, table, rejected, self._snapshot, now, since, shortlisted)
        )
        pod, away = args.pod, self.turned_away
        if away is not None and since is not None and len(rejected) == len(names):
            # Turned away from every node (an overflow node passes): kept for the requeue.
            until = since + self.settings.herd_guard.wait_for_room
            away.remember(
                pod.uid, pod.namespace, pod.name, names, now, table.evals.keys(), needs, until
            )
        elif away is not None:
            away.forget(pod.uid)
        return FilterDecision(failed=failed, passed=passed)

    def _shortlisted(
        self, table: Table, args: ExtenderArgs, rejected: int, tight: Set[NodeName]
    ) -> list[NodeName] | None:
        """Our best measured passing nodes (`prioritize.shortlist`) plus those we have no
        data for; None when every passing node goes (no shortlist, few nodes, or the pod
        weighs nodes itself). Our best one only while pods we expect are not seen bound."""
        rule = self.settings.prioritize.shortlist
        names = args.names
        if args.pod.prefers:
            return None
        passing = len(names) - rejected
        if self.expecting and (self.unconfirmed or passing == 1):
            # A burst we learn of late, or one node left it: the pod goes where it counts.
            keep: int | None = 1 if passing >= 1 else None
        elif rule is None:
            return None
        else:
            keep = shortlist_size(rule.nodes, rule.share, passing)
        if keep is None:
            return None
        whole = table.whole.nodes  # the measured nodes that pass
        # Every one of them asked: no lookup per name.
        if args.exactly is whole or (len(names) == len(whole) and whole.issuperset(names)):
            return shortlist(table.ranking, keep, args.pod.uid, skip=tight)
        chosen = shortlist(table.ranking, keep, args.pod.uid, set(names), tight)
        if table.unknown.reason is None:  # no data: not ours to narrow
            evals = table.evals  # a lookup per name asked, not a walk of every node
            chosen += [n for n in names if n not in evals and n not in tight]
        return chosen

    def prioritize(self, args: ExtenderArgs, now: float) -> Priorities:
        names = args.names
        policy = self.policy_of(args.pod) if self.is_ours(args.pod) else None
        if policy is None:  # not ours, or an unknown policy (the filter rejected it)
            return Priorities(names, whole=NO_SCORES)
        self.expire_tentative(now)
        self.unexpect(args.pod.uid, now)  # asked again (no filterVerb): judged without it
        table = self.table(now, policy)
        if self.pods.get(args.pod.uid) is None:  # no filterVerb: remember it here
            self.pods.remember(_memo(args, policy, table, frozenset(), self._snapshot, now))
        guarded = self.expecting
        max_hosts = self.settings.prioritize.max_hosts
        if has_candidates_metric(policy) or (max_hosts is not None and len(names) > max_hosts):
            answer = _scored(policy, table, args, max_hosts)
            best = _best_scored(answer, args.pod.uid) if guarded else None
        else:
            whole = args.exactly is table.whole.nodes  # the common case: table.WholeAnswer
            if whole:
                answer = Priorities(names, whole=table.whole.encoded())
            else:
                answer = Priorities(names, fragments=table.fragments)
            best = _best_ranked(table, args, whole) if guarded else None
        if best is not None:
            # Counted now: the next pods are decided before the watch shows it bound.
            self.expect(args.pod.uid, best, args.pod, now)
        return answer

    def preempt(self, args: PreemptionArgs, now: float) -> Mapping[str, object]:
        """The scheduler's victims, for the nodes we pass once they are gone (preemption.py)."""
        if not self.is_ours(args.pod):
            return args.victims
        self.expire_tentative(now)
        policy = self.policy_of(args.pod)
        if policy is None:
            return {}
        kept = self._passing_after(policy, args.pod, args.victims, now)
        self.preemptions.remember(args.pod.uid, kept, now)
        if len(kept) == 1:
            # Nominated there at once: counted now, not when the watch shows it.
            [node] = kept
            self.nominate(args.pod.uid, node, args.pod, now, tentative=True)
        return kept

    def _cleared_for_preemptor(
        self, policy: Policy, pod: PodFacts, now: float
    ) -> frozenset[NodeName]:
        """The nodes where /preempt accepted victims for `pod` that pass without them (the
        scheduler asks again before our watch sees them deleted)."""
        accepted = self.preemptions.get(pod.uid, now)
        held = self._herd.reservations.get(pod.uid)
        nominated = held.node if held is not None and held.source == NOMINATED else None
        if accepted is None and nominated is None:
            return frozenset()
        victims = dict(accepted.victims) if accepted is not None else {}
        if nominated is not None:  # its own room: judged without it, then with it
            victims.setdefault(nominated, {"Pods": [], "NumPDBViolations": 0})
        return frozenset(
            self._passing_after(policy, pod, victims, now, accepted.at if accepted else None)
        )

    def _passing_after(
        self,
        policy: Policy,
        pod: PodFacts,
        victims: Mapping[NodeName, object],
        now: float,
        gone_at: float | None = None,
    ) -> dict[NodeName, object]:
        """preemption.passing_after_victims, with the cores of a victim's measured use the
        herd metric shows now (`gone_at`: when the victims were deleted, after which the
        metric shows them less)."""
        snapshot, settle = self._snapshot, self.settings.herd_guard.settle
        window = self.guard.window.seconds
        data_at = data_time(snapshot, [policy.herd_metric]) if policy.herd_metric else None
        fading = 1.0 if gone_at is None else unshown_share(gone_at, data_at, settle, window)

        def shown(uid: str, node: NodeName) -> float:
            reservation = self._herd.reservations.get(uid)
            if fading <= 0 or (reservation is not None and reservation.node != node):
                return 0.0
            memo = self.pods.get(uid)
            if memo is not None:
                facts = memo.facts
            elif reservation is not None and reservation.pod is not None:
                namespace, name = reservation.pod
                facts = PodFacts(uid, name, namespace, "", None)
            else:
                return 0.0
            expected = self.guard.expected(facts, snapshot, now)
            if expected.source not in MEASURED:
                return 0.0
            held = 0.0
            if reservation is not None:
                held = unshown_share(reservation.bound_at, data_at, settle, window)
            return expected.cores * (1.0 - held) * fading

        cores = self.guard.expected(pod, snapshot, now).cores
        table = self.table(now, policy)
        return passing_after_victims(
            policy, table, snapshot, self._herd, victims, cores, now, shown, pod.uid
        )

    def readiness(self, now: float) -> tuple[bool, dict[str, object]]:
        """/readyz's metrics section (`readiness`) over the tables in force."""
        return readiness(
            self.policies.values(), self._snapshot, lambda p: self.table(now, p).stale, now
        )


def node_figures(
    engine: Engine, now: float
) -> tuple[dict[str, dict[NodeName, int]], dict[str, dict[str, float]]]:
    """(policy -> node -> score, metric -> node -> value) in force, for dashboards."""
    values = {name: dict(series.values) for name, series in engine.snapshot.metrics.items()}
    scores = {name: dict(engine.table(now, p).scores) for name, p in engine.policies.items()}
    return scores, values


def _memo(
    args: ExtenderArgs,
    policy: Policy | None,
    table: Table | None,
    rejected: frozenset[str],
    snapshot: Snapshot,
    now: float,
    waiting: float | None = None,
    shortlisted: int | None = None,
) -> PodMemo:
    """What was decided, for the bind guard and /explain: references, no copies (O(1))."""
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
        room_wait_since=waiting,
        shortlisted=shortlisted,
    )


def _spread_thin(table: Table, tight: Set[NodeName], share: float) -> bool:
    """Too big for every node (`tight`) of a cluster with room (its headroom adds up to
    `share` of its cores, herdGuard.spareRoom): waiting for one node to free that much costs
    the pod more than a node over its threshold, never past its capacity, costs the node."""
    return bool(tight) and table.headroom is not None and table.headroom.spare() >= share


def _waiting_since(memo: PodMemo | None, pod: PodFacts, now: float) -> float:
    """Since when the pod has waited for room: its creation, else when we first found none."""
    since = memo.room_wait_since if memo is not None else None
    created = api_time(pod.created)
    if created is not None and created <= now:
        return created if since is None else min(since, created)
    return now if since is None else since


def _scored(policy: Policy, table: Table, args: ExtenderArgs, max_hosts: int | None) -> Priorities:
    """Prioritize scored per request: over its own candidates, or its best `max_hosts`."""
    names = args.names
    if has_candidates_metric(policy):
        scores = score_candidates(policy, [table.eval_of(n) for n in names])
    else:
        scores = [table.scores.get(n, table.unknown_score) for n in names]
    if not max_hosts:
        return Priorities(names, scores=scores)
    keep = top_hosts(names, scores, max_hosts, tie_start(args.pod.uid, len(names)))
    return Priorities([names[i] for i in keep], scores=[scores[i] for i in keep])


def _best_ranked(table: Table, args: ExtenderArgs, whole: bool) -> NodeName | None:
    """The node of `args` our table ranks first, or None when an unknown node may outscore it."""
    asked = None if whole else frozenset(args.names)
    best = shortlist(table.ranking, 1, args.pod.uid, asked)
    if not best:
        return None
    outscored = not whole and table.unknown_score > table.scores[best[0]]
    if outscored and any(n not in table.evals for n in args.names):
        return None
    return best[0]


def _best_scored(answer: Priorities, uid: str) -> NodeName | None:
    """The highest-scored host of a per-request answer (ties from the pod's start)."""
    hosts, scores = answer.hosts, answer.scores
    if not hosts:
        return None
    top = max(scores)
    tied = [h for h, s in zip(hosts, scores, strict=True) if s == top]
    return tied[tie_start(uid, len(tied))]


def _rejected(table: Table, names: list[str]) -> dict[str, str]:
    """node -> reason for the nodes of this request that the filter rejects."""
    # Hashing the names costs about as much as parsing them (BENCHMARKS.md), so the
    # healthy common case looks nothing up, and the next one set check.
    if table.passes_all or table.ok.issuperset(names):
        return {}
    failed: dict[str, str] = {}
    for n in filterfalse(table.ok.__contains__, names):
        reason = table.reasons.get(n) if n in table.evals else table.unknown.reason
        if reason is not None:
            failed[n] = reason
    return failed


def readiness(
    policies: Iterable[Policy],
    snapshot: Snapshot,
    stale_of: Callable[[Policy], frozenset[str]],
    now: float,
) -> tuple[bool, dict[str, object]]:
    """(ready, metric -> detail): ready when every fail-closed metric has fresh values
    (fail-open ones always serve, a node without data scored neutral)."""
    detail: dict[str, object] = {}
    ready = True
    for policy in policies:
        stale = stale_of(policy)
        for m in policy.metrics:
            series = snapshot.metrics.get(m.name)
            fetched = series.fetched_at if series else None
            fresh = m.name not in stale
            # fail-closed with no fresh values (or empty) filters every node: not ready.
            if m.on_missing == "fail-closed" and (not fresh or not series or not series.values):
                ready = False
            # One entry per metric: fail-closed in any policy decides.
            if m.name not in detail or m.on_missing == "fail-closed":
                detail[m.name] = {
                    "fresh": fresh,
                    "ageSeconds": None if fetched is None else round(now - fetched, 3),
                    "nodes": len(series.values) if series else 0,
                    "onMissing": m.on_missing,
                    "error": series.error if series else None,
                }
    return ready, detail
