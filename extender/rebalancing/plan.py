"""Which running pods to move, and where: the rebalancer's decisions, pure, from the tables
filter and prioritize answer from. A pod is a candidate when its node is filtered, or the
best passing node with headroom for it scores `margin` more; it is due after `sustain`
checks. `Moves` admits the due ones one at a time within `maxEvictionsPerCycle` and
`maxEvictionsPerNode`, each move counted in the herd guard's view. Pods the API would
refuse now come in `held`; pods a rule protects (rebalancing.pods) never are candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from extender.decisions.estimate import expected_cores, expected_use
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.pods import PodFacts
from extender.decisions.table import Table
from extender.policy.policies import Policy
from extender.policy.sections import RebalanceSettings
from extender.policy.settings import Settings
from extender.rebalancing.pods import RunningPod, protection
from extender.rebalancing.scores import NodeScores

Outcome = Literal["move", "waiting", "held", "refused", "stay"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One pod under the re-check: what happens to it, and why, with the numbers."""

    pod: RunningPod
    outcome: Outcome
    reason: str
    policy: str = ""
    source_score: int | None = None  # None: its node is filtered
    target: NodeName = ""
    target_score: int | None = None
    checks: int = 0  # consecutive checks as a candidate, this one included

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
    limits: Moves  # admits the due pods within the cycle's limits
    decisions: list[Decision] = field(default_factory=list)
    streaks: dict[str, int] = field(default_factory=dict)
    """uid -> consecutive checks as a candidate, for the next check (candidates only)."""
    skipped: dict[str, int] = field(default_factory=dict)  # protected pods by reason
    waiting: int = 0  # our pods waiting for room, that took theirs first
    due: list[Decision] = field(default_factory=list)
    """Pods due to move, most to gain first, before the cycle's limits (`Moves.admit`)."""

    @property
    def moves(self) -> list[Decision]:
        return [d for d in self.decisions if d.outcome == "move"]

    def record(self, decision: Decision) -> None:
        """A final decision of this check; a pod held or refused stays due (its streak)."""
        self.decisions.append(decision)
        if decision.outcome in ("waiting", "held", "refused"):
            self.streaks[decision.pod.facts.uid] = decision.checks


def plan(
    settings: Settings,
    pods: Sequence[RunningPod],
    tables: Mapping[str, Table],
    snapshot: Snapshot,
    streaks: Mapping[str, int],
    node_cores: Mapping[NodeName, float],
    now: float,
    held: Mapping[str, str] | None = None,
    *,
    admit: bool = True,
    waiting: Sequence[PodFacts] = (),
) -> Plan:
    """Every running pod's decision. `admit`: the due ones admitted in turn, every eviction
    taken as accepted (the simulation's); else left in `due` for the caller to ask the API
    about and admit (`Plan.limits`). `held`: uid -> why the API would refuse to evict now.
    `waiting`: pods of ours waiting for room (`pods.waits_for_room`): the room they fit in
    is theirs before any move's, as a successor would queue behind them."""
    rules = settings.rebalance
    held = held or {}
    out = Plan(Moves(settings, node_cores, snapshot, now, streaks))
    moves = out.limits
    for pod in pods:  # every running pod of ours holds its request, protected ones too
        moves.request(pod.facts.node_name, pod.facts.cpu_request)
    out.waiting = len(waiting)
    for facts in waiting:
        policy = settings.policy_for(facts.policy)
        if policy is not None:
            moves.claim(facts, moves.scores(policy, tables[policy.name]))
    candidates: list[tuple[Decision, float]] = []
    for pod in pods:
        if pod.facts.scheduler_name not in settings.scheduler_names:
            continue
        why = protection(pod, rules, now)
        policy = settings.policy_for(pod.facts.policy)
        if why is not None or policy is None:
            why = why or "unknown policy"
            out.skipped[why] = out.skipped.get(why, 0) + 1
            continue
        scores = moves.scores(policy, tables[policy.name])
        decision, gain = _check(pod, policy, scores, rules, streaks, moves)
        if decision.outcome == "stay":
            out.record(decision)
        else:
            candidates.append((decision, gain))
    # Most to gain first: a filtered node before a merely worse one, then by score gained,
    # then by name (deterministic). Limits then keep the moves that matter most.
    candidates.sort(key=lambda c: (-c[1], c[0].pod.facts.namespace, c[0].pod.facts.name))
    for decision, _ in candidates:
        hold = held.get(decision.pod.facts.uid)
        if decision.outcome == "waiting":
            out.record(decision)
        elif hold is not None:
            out.record(replace(decision, outcome="held", reason=f"{decision.reason}; {hold}"))
        else:
            out.due.append(decision)
    for decision in out.due if admit else ():
        admitted = moves.admit(decision)
        out.record(admitted)
        if admitted.outcome == "move":
            moves.made(admitted)
    return out


class Moves:
    """The cycle's limits and the herd guard's view of the moves made so far."""

    def __init__(
        self,
        settings: Settings,
        node_cores: Mapping[NodeName, float],
        snapshot: Snapshot,
        now: float,
        streaks: Mapping[str, int],
    ) -> None:
        self._settings = settings
        self._node_cores = node_cores
        self._snapshot = snapshot
        self._now = now
        self._streaks = streaks
        self._extra: dict[NodeName, float] = {}  # node -> load the moves add (or free)
        self._scores: dict[str, NodeScores] = {}
        self._per_node: dict[NodeName, int] = {}
        self._requested: dict[NodeName, float] = {}  # node -> CPU requests of ours on it
        self.made_count = 0

    def scores(self, policy: Policy, table: Table) -> NodeScores:
        if policy.name not in self._scores:
            scores = NodeScores(policy, table, self._snapshot, self._extra, self._now)
            self._scores[policy.name] = scores
        return self._scores[policy.name]

    def cores(self, pod: PodFacts) -> float:
        """The cores the pod is expected to use (estimate.py)."""
        guard, usage = self._settings.herd_guard, self._snapshot.usage
        return expected_use(
            pod.namespace, pod.name, pod.workload, pod.cpu_request, usage, guard, self._now
        ).cores

    def successor_cores(self, pod: PodFacts) -> float:
        """What the filter counts the pod's successor at (estimate.expected_cores): a new
        pod, with a new name that has no measured use of its own yet (so "" here), judged by
        its workload's median."""
        guard, usage = self._settings.herd_guard, self._snapshot.usage
        return expected_cores(
            pod.namespace, "", lambda: pod.workload, pod.cpu_request, usage, guard, self._now
        )

    def request(self, node: NodeName, cpu: float | None) -> None:
        if node and cpu:
            self._requested[node] = self._requested.get(node, 0.0) + cpu

    def fits(self, scores: NodeScores, node: NodeName, needs: float, cpu: float | None) -> bool:
        """`node` has headroom for `needs` cores of use and, as kube-scheduler's
        NodeResourcesFit counts, allocatable CPU for a `cpu` request beside ours (other
        schedulers' pods are not listed: an unknown size or request passes)."""
        room = scores.headroom(node)
        if room is not None and room * self.size(node) < needs:
            return False
        allocatable = self._node_cores.get(node)
        return not (allocatable and cpu) or self._requested.get(node, 0.0) + cpu <= allocatable

    def claim(self, pod: PodFacts, scores: NodeScores) -> None:
        """A pod waiting for room takes it on the best node it fits, as the scheduler would
        place it (judged as the filter judges a new pod): the moves see what is left."""
        needs, cpu = self.successor_cores(pod), pod.cpu_request
        best = scores.best("", lambda n: self.fits(scores, n, needs, cpu))
        if best is not None:
            self._shift(best[0], needs)
            self.request(best[0], cpu)

    def _shift(self, node: NodeName, cores: float) -> None:
        """`cores` of expected use arrive on `node` (negative: leave it)."""
        self._extra[node] = self._extra.get(node, 0.0) + cores / self.size(node)
        for scores in self._scores.values():
            scores.touch((node,))

    def size(self, node: NodeName) -> float:
        return self._node_cores.get(node) or self._settings.herd_guard.default_node_cores

    def admit(self, decision: Decision) -> Decision:
        """A due decision checked again against the moves made so far: "move", "stay" (the
        herd guard changed the picture) or "held" (a limit)."""
        settings, rules = self._settings, self._settings.rebalance
        policy = settings.policy_map[decision.policy]
        scores = self._scores[decision.policy]
        again, _ = _check(decision.pod, policy, scores, rules, self._streaks, self)
        if again.outcome == "stay":
            return again
        source = decision.pod.facts.node_name
        if self.made_count >= rules.max_evictions_per_cycle:
            limit = "maxEvictionsPerCycle reached"
        elif self._per_node.get(source, 0) >= rules.max_evictions_per_node:
            limit = f"maxEvictionsPerNode reached on {source}"
        else:
            return again
        return replace(again, outcome="held", reason=f"{again.reason}; {limit}")

    def made(self, decision: Decision) -> None:
        """The move was made (or would be, in a dry run): it uses its limits, and its
        expected use leaves its node for the target (shares of each node's cores)."""
        facts = decision.pod.facts
        source = facts.node_name
        self.made_count += 1
        self._per_node[source] = self._per_node.get(source, 0) + 1
        cores = self.cores(facts)
        self._shift(source, -cores)
        self._shift(decision.target, cores)
        self.request(decision.target, facts.cpu_request)  # the source's until it is gone


def _check(
    pod: RunningPod,
    policy: Policy,
    scores: NodeScores,
    rules: RebalanceSettings,
    streaks: Mapping[str, int],
    moves: Moves,
) -> tuple[Decision, float]:
    """(the decision for one pod, what moving it gains) before the cycle's limits."""
    facts = pod.facts
    reason, here = scores.verdict(facts.node_name)
    cores = moves.cores(facts)
    # The successor must pass the filter there: it is judged as a new pod of its workload,
    # which may need more than this pod's own measured use.
    needs = max(cores, moves.successor_cores(facts))

    cpu = facts.cpu_request
    best = scores.best(facts.node_name, lambda n: moves.fits(scores, n, needs, cpu))
    stay = Decision(pod, "stay", "", policy=policy.name)
    if best is None:  # evicting would leave the successor nowhere to go
        detail = f"{reason}, but" if reason is not None else "stays:"
        return replace(stay, reason=f"{detail} no other node has headroom for it"), 0.0
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
        # Leaving a filtered node comes first; of its pods, the one that relieves it best.
        share = cores / moves.size(facts.node_name)
        priority = 100.0 + there + relief(share, scores.overshoot(facts.node_name))
    checks = streaks.get(facts.uid, 0) + 1
    outcome: Outcome = "move" if checks >= rules.sustain else "waiting"
    if outcome == "waiting":
        why += f"; candidate {checks}/{rules.sustain} checks"
    decision = Decision(pod, outcome, why, policy.name, source_score, target, there, checks)
    return decision, priority


def relief(share: float, overshoot: float | None) -> float:
    """In [0, 1): how well moving a pod using `share` of its node brings it under its
    threshold: the smallest pod that is enough first, then the larger the better."""
    if overshoot is None or share <= 0:
        return 0.0
    if share >= overshoot:
        return 0.5 + 0.49 * overshoot / share
    return 0.49 * share / overshoot
