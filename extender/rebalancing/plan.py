"""Which running pods to move, and where they would go: the rebalancer's decisions, pure.

Every `rebalance.interval` the rebalancer (rebalancer.py) hands this module the running
pods of our schedulers and the engine's tables, the very tables filter and prioritize
answer from: the scores that evict a pod are the scores that place its successor.

A pod is a candidate to move when its node is filtered by its policy (over a threshold,
or data missing under fail-closed), or when the best node the filter passes scores at
least `margin` points more (stickiness). It moves after `sustain` consecutive checks as a
candidate, within `maxEvictionsPerCycle` and `maxEvictionsPerNode`, and only if a passing
node is there to take its successor. Each planned move counts like a placement in the herd
guard: the pod's CPU request is taken off its node and put on the target, so one hot node
does not empty onto one cool node within a check.

Only pods whose controller recreates them are ever moved (see `protection`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from extender.decisions.model import NodeName, Snapshot
from extender.decisions.pods import PodFacts, api_time, read_pod
from extender.decisions.scoring import NodeEval, evaluate_node, range_score, score_candidates
from extender.decisions.table import Table
from extender.policy.policies import Policy
from extender.policy.sections import RebalanceSettings
from extender.policy.settings import Settings

OPT_OUT_ANNOTATION = "decice.io/rebalance"
"""`decice.io/rebalance: "false"` keeps a pod where it is."""
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set by the kubelet on the API's copy of a static pod."""
NEVER_MOVED_KINDS = frozenset({"DaemonSet", "Node", "Job"})
"""Owners whose pods are never evicted: a DaemonSet's pod would come back on the same
node, a Node owns mirror pods of static pods, and an evicted Job pod counts against the
Job's backoffLimit."""

Outcome = Literal["move", "waiting", "held", "stay"]


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A running pod as the rebalancer sees it (read from the API's v1.Pod)."""

    facts: PodFacts
    owner_kind: str | None
    """The kind of the controller ownerReference; None for a bare pod."""
    created: float | None
    """metadata.creationTimestamp, Unix seconds."""
    opted_out: bool = False
    mirror: bool = False
    terminating: bool = False
    """metadata.deletionTimestamp is set (evicted or deleted; the kubelet is stopping it)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One pod under the re-check: what happens to it, and why, with the numbers."""

    pod: RunningPod
    outcome: Outcome
    reason: str
    policy: str = ""
    source_score: int | None = None
    """The pod's node's score (None: the node is filtered)."""
    target: NodeName = ""
    target_score: int | None = None
    checks: int = 0
    """Consecutive checks as a candidate, this one included."""

    @property
    def text(self) -> str:
        """One line for logs and Events: node, scores, the reason."""
        pod = self.pod.facts
        here = "filtered" if self.source_score is None else f"score {self.source_score}"
        line = f"{pod.namespace}/{pod.name} on {pod.node_name} ({here})"
        if self.target:
            line += f", best {self.target} (score {self.target_score})"
        return f"{line}: {self.reason}"


@dataclass(slots=True)
class Plan:
    decisions: list[Decision] = field(default_factory=list)
    streaks: dict[str, int] = field(default_factory=dict)
    """uid -> consecutive checks as a candidate, for the next check (only pods still
    candidates: memory is bounded by the running pods of ours)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Protected pods by reason (never candidates)."""

    @property
    def moves(self) -> list[Decision]:
        return [d for d in self.decisions if d.outcome == "move"]


def read_running_pod(doc: Any) -> RunningPod:
    """A v1.Pod (decoded JSON) as a RunningPod; PodError names a bad field."""
    facts = read_pod(doc)
    meta = doc["metadata"]  # read_pod checked it is an object
    owner = None
    refs = meta.get("ownerReferences")
    if isinstance(refs, list):
        for ref in refs:
            if isinstance(ref, dict) and ref.get("controller") is True:
                kind = ref.get("kind")
                owner = kind if isinstance(kind, str) else None
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    return RunningPod(
        facts=facts,
        owner_kind=owner,
        created=api_time(meta.get("creationTimestamp")),
        opted_out=str(annotations.get(OPT_OUT_ANNOTATION, "")).lower() == "false",
        mirror=MIRROR_ANNOTATION in annotations,
        terminating=meta.get("deletionTimestamp") is not None,
    )


def protection(pod: RunningPod, rules: RebalanceSettings, now: float) -> str | None:
    """Why this pod must never be moved now, or None. Safe by construction: only pods a
    controller recreates, and never what an operator or a static manifest pins."""
    if pod.terminating:
        return "terminating"
    if pod.mirror or pod.owner_kind == "Node":
        return "static pod"
    if pod.owner_kind is None:
        return "bare pod (no controller recreates it)"
    if pod.owner_kind in NEVER_MOVED_KINDS:
        return f"{pod.owner_kind} pod"
    if pod.opted_out:
        return f'annotation {OPT_OUT_ANNOTATION}: "false"'
    if not pod.facts.node_name:
        return "not on a node"
    if pod.created is None or now - pod.created < rules.min_age:
        return f"younger than minAge {rules.min_age:g}s"
    return None


class Standing:
    """One policy's verdicts and scores for this check, with the herd guard's view of the
    moves planned so far: nodes touched by a move are re-evaluated with the load it frees
    or adds (scoring.evaluate_node, the function that built the table)."""

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
        self._extra = extra
        """node -> load the planned moves add (negative: free), shared by the policies."""
        self._now = now
        self._candidates = any(m.normalize == "candidates" for m in policy.metrics)
        self._scores = self._score_all(table.evals)
        self._touched: dict[NodeName, tuple[str | None, int]] = {}
        # Best first, ties by name: sorted once per check; a lookup skips the few nodes
        # excluded or touched by planned moves, so it stops after a handful of entries.
        self._ranking = sorted((-s, n) for n, s in self._scores.items() if n in table.ok)

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
            if self._candidates:
                evals = {**table.evals, n: e}
                score = self._score_all(evals).get(n, 0)
            else:
                score = range_score(self._policy, e)
            self._touched[n] = (e.reason, score)

    def verdict(self, node: NodeName) -> tuple[str | None, int]:
        """(filter reason or None, score) of a node for this policy."""
        if node in self._touched:
            return self._touched[node]
        e = self._table.eval_of(node)
        score = self._scores.get(node, self._table.unknown_score)
        return e.reason, score

    def best(self, exclude: NodeName) -> tuple[NodeName, int] | None:
        """The passing node with the highest score, ties by name; None when none passes."""
        found: tuple[int, NodeName] | None = None
        for n, (reason, score) in self._touched.items():
            if n != exclude and reason is None and (found is None or (-score, n) < found):
                found = (-score, n)
        for neg, n in self._ranking:
            if n == exclude or n in self._touched:
                continue
            if found is None or (neg, n) < found:
                found = (neg, n)
            break
        return None if found is None else (found[1], -found[0])


def plan(
    settings: Settings,
    pods: Sequence[RunningPod],
    tables: Mapping[str, Table],
    snapshot: Snapshot,
    streaks: Mapping[str, int],
    node_cores: Mapping[NodeName, float],
    now: float,
) -> Plan:
    """Decide, for every running pod of ours, whether it moves now, and where to."""
    rules = settings.rebalance
    out = Plan()
    extra: dict[NodeName, float] = {}
    standings: dict[str, Standing] = {}
    candidates: list[tuple[Decision, float]] = []
    for pod in pods:
        if pod.facts.scheduler_name not in settings.scheduler_names:
            continue
        why = protection(pod, rules, now)
        if why is not None:
            out.skipped[why] = out.skipped.get(why, 0) + 1
            continue
        name = pod.facts.policy or settings.default.name
        policy = settings.policy_map.get(name)
        if policy is None:
            out.skipped["unknown policy"] = out.skipped.get("unknown policy", 0) + 1
            continue
        standing = standings.get(name)
        if standing is None:
            standing = Standing(policy, tables[name], snapshot, extra, now)
            standings[name] = standing
        decision, gain = _check(pod, policy, standing, rules, streaks)
        if decision.outcome == "stay":
            out.decisions.append(decision)
        else:
            candidates.append((decision, gain))
    # Most to gain first: a filtered node before a merely worse one, then by score gained,
    # then by name (deterministic). Limits then keep the moves that matter most.
    candidates.sort(key=lambda c: (-c[1], c[0].pod.facts.namespace, c[0].pod.facts.name))
    per_node: dict[NodeName, int] = {}
    moved = 0
    for decision, _ in candidates:
        facts = decision.pod.facts
        if decision.outcome == "waiting":
            out.streaks[facts.uid] = decision.checks
            out.decisions.append(decision)
            continue
        # Ready to move: check again against the moves planned so far (herd guard).
        policy_name = decision.policy
        standing = standings[policy_name]
        again, _ = _check(decision.pod, settings.policy_map[policy_name], standing, rules, streaks)
        if again.outcome == "stay":
            out.decisions.append(again)
            continue
        source = facts.node_name
        if moved >= rules.max_evictions_per_cycle:
            held = "maxEvictionsPerCycle reached"
        elif per_node.get(source, 0) >= rules.max_evictions_per_node:
            held = f"maxEvictionsPerNode reached on {source}"
        else:
            held = ""
        if held:
            out.streaks[facts.uid] = again.checks  # still due: first in line next check
            out.decisions.append(replace(again, outcome="held", reason=f"{again.reason}; {held}"))
            continue
        moved += 1
        per_node[source] = per_node.get(source, 0) + 1
        _account(extra, facts, source, again.target, settings, node_cores)
        for s in standings.values():
            s.touch((source, again.target))
        out.decisions.append(again)
    return out


def _check(
    pod: RunningPod,
    policy: Policy,
    standing: Standing,
    rules: RebalanceSettings,
    streaks: Mapping[str, int],
) -> tuple[Decision, float]:
    """(the decision for one pod, what moving it gains) before the cycle's limits."""
    facts = pod.facts
    reason, here = standing.verdict(facts.node_name)
    best = standing.best(exclude=facts.node_name)
    stay = Decision(pod, "stay", "", policy=policy.name)
    if best is None:  # evicting would leave the successor nowhere to go
        detail = f"{reason}, but" if reason is not None else "stays:"
        return replace(stay, reason=f"{detail} no other node passes the filter"), 0.0
    target, there = best
    if reason is None:
        gain = there - here
        if gain < rules.margin:
            return replace(
                stay, source_score=here, reason=f"stays: gain {gain} < margin {rules.margin}"
            ), 0.0
        why = f"score {here} here, {there} on {target}: gain {gain} >= margin {rules.margin}"
        source_score: int | None = here
        priority = float(gain)
    else:
        why = f"node filtered ({reason})"
        source_score = None
        priority = 100.0 + there  # leaving a filtered node comes first
    checks = streaks.get(facts.uid, 0) + 1
    outcome: Outcome = "move" if checks >= rules.sustain else "waiting"
    if outcome == "waiting":
        why += f"; candidate {checks}/{rules.sustain} checks"
    decision = Decision(pod, outcome, why, policy.name, source_score, target, there, checks)
    return decision, priority


def _account(
    extra: dict[NodeName, float],
    pod: PodFacts,
    source: NodeName,
    target: NodeName,
    settings: Settings,
    node_cores: Mapping[NodeName, float],
) -> None:
    """The herd guard's view of one move: the pod's CPU request leaves `source` and its
    successor's arrives on `target` (shares of each node's cores)."""
    guard = settings.herd_guard
    cores = pod.cpu_request if pod.cpu_request is not None else guard.default_cpu_request
    for node, sign in ((source, -1.0), (target, 1.0)):
        size = node_cores.get(node) or guard.default_node_cores
        extra[node] = extra.get(node, 0.0) + sign * cores / size
