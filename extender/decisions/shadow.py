"""Shadow verdicts: what we would have advised for a placement another scheduler made, the
summary a person reads, and exceedance: what the chosen node did after. Pure.

The chosen node is judged against our table of that moment, among the nodes the pod could
have gone to: our best (`best`), one of our three best (`top3`), another our filter passes
(`other`) or one it rejects (`rejected`); and the score gap to our best.

Exceedance: each placement is watched against its policy's threshold until a snapshot
within the window shows its node over it (`exceeded`), the window closes with fresh values
none over (`under`) or none at all (`unobserved`: no evidence, left out of the share), or
more than `keep` are watched (`dropped`). The share is exceeded / (exceeded + under), on
measured values: what the node really did.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Literal

from extender.decisions.headroom import fit_rule
from extender.decisions.labels import selects
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.table import Table
from extender.policy.policies import Policy
from extender.policy.sections import ShadowSettings

Verdict = Literal["best", "top3", "other", "rejected"]
VERDICTS: tuple[Verdict, ...] = ("best", "top3", "other", "rejected")


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    chosen_score: int
    best: NodeName | None
    """Our best eligible node (None: no eligible node passes our filter)."""
    best_score: int | None
    gap: int
    reason: str | None
    """Our filter's reason for rejecting the chosen node."""


def judge(table: Table, chosen: NodeName, eligible: Callable[[NodeName], bool]) -> Judgement:
    """The chosen node against our best three eligible nodes of `table` (its ranking walked
    until three are found: O(1) in the usual case)."""
    reason = None if table.passes(chosen) else table.eval_of(chosen).reason
    chosen_score = table.scores.get(chosen, table.unknown_score)
    top: list[tuple[int, NodeName]] = []
    for negative, node in table.ranking:
        if eligible(node):
            top.append((-negative, node))
            if len(top) == 3:
                break
    best_score, best = top[0] if top else (None, None)
    gap = max(best_score - chosen_score, 0) if best_score is not None else 0
    verdict: Verdict
    if reason is not None:
        verdict = "rejected"
    elif best_score is None or chosen_score >= best_score:
        verdict = "best"
    elif len(top) < 3 or chosen_score >= top[-1][0]:
        verdict = "top3"
    else:
        verdict = "other"
    return Judgement(verdict, chosen_score, best, best_score, gap, reason)


@dataclass(frozen=True, slots=True)
class Assignment:
    namespace: str
    name: str
    policy: str
    scheduler: str
    node: NodeName
    judgement: Judgement
    values: Mapping[str, float | None]
    """The chosen node's metric values at that moment (raw)."""
    at: float


class ShadowLog:
    """The last `keep` assignments (a ring: memory bounded whatever the cluster does)."""

    def __init__(self, keep: int) -> None:
        self._ring: deque[Assignment] = deque(maxlen=keep)
        self.seen = 0  # since the start

    def add(self, assignment: Assignment) -> None:
        self._ring.append(assignment)
        self.seen += 1

    def __len__(self) -> int:
        return len(self._ring)

    def __iter__(self) -> Iterator[Assignment]:
        return iter(self._ring)

    def summary(self, over: Mapping[str, float] | None = None, worst: int = 5) -> dict[str, object]:
        """Placements, agreement, share onto nodes over `over` (metric -> value), median
        gap, and the `worst` nodes most often chosen against our advice."""
        ring = list(self._ring)
        kept = len(ring)
        verdicts = Counter(a.judgement.verdict for a in ring)
        reasons = Counter(a.judgement.reason for a in ring if a.judgement.reason is not None)
        against = Counter(a.node for a in ring if a.judgement.verdict in ("other", "rejected"))
        gaps = [a.judgement.gap for a in ring]
        doc: dict[str, object] = {
            "seen": self.seen,
            "kept": kept,
            "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
            "agreement": round(verdicts["best"] / kept, 4) if kept else None,
            "inTop3": round((verdicts["best"] + verdicts["top3"]) / kept, 4) if kept else None,
            "rejected": dict(reasons.most_common()),
            "medianGap": statistics.median(gaps) if gaps else None,
            "againstAdvice": [{"node": n, "placements": c} for n, c in against.most_common(worst)],
            "byPolicy": dict(Counter(a.policy for a in ring)),
        }
        if over:
            hot = {m: sum((a.values.get(m) or 0.0) > v for a in ring) for m, v in over.items()}
            doc["over"] = {m: round(n / kept, 4) if kept else None for m, n in hot.items()}
        return doc


def covers(selection: ShadowSettings, pod: Any) -> bool:
    """The pod is one the shadow judges: its scheduler, namespace and labels selected."""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return False
    if selection.scheduler_names and spec.get("schedulerName") not in selection.scheduler_names:
        return False
    if selection.namespaces and meta.get("namespace") not in selection.namespaces:
        return False
    if (chosen := selection.label_selector) is None:
        return True
    labels = meta.get("labels")
    return selects(chosen.model_dump(by_alias=True), labels if isinstance(labels, dict) else {})


Outcome = Literal["exceeded", "under", "unobserved", "dropped"]
OUTCOMES: tuple[Outcome, ...] = ("exceeded", "under", "unobserved", "dropped")


@dataclass(frozen=True, slots=True)
class Threshold:
    """The line a placement's node is watched against: `metric` above `above`."""

    metric: str
    above: float

    def __str__(self) -> str:
        return f"{self.metric} above {self.above:g}"


def threshold_of(policy: Policy) -> Threshold | None:
    """The herd metric's filter.above (the line the herd guard keeps placements under); else
    the first filter.above of the policy's metrics; None: nothing to exceed."""
    rule = fit_rule(policy)
    if rule is not None:
        return Threshold(rule.metric, rule.above)
    for m in policy.metrics:
        if m.filter is not None and m.filter.above is not None:
            return Threshold(m.name, m.filter.above)
    return None


@dataclass(eq=False, slots=True)
class Watch:
    """One placement watched (compared by identity: it is removed from its node's queue)."""

    node: NodeName
    policy: str
    verdict: Verdict
    threshold: Threshold
    at: float
    until: float
    """The end of its window."""
    outcome: Outcome | None = None
    settled_at: float | None = None
    value: float | None = None
    """The value over the threshold (exceeded)."""

    def detail(self) -> dict[str, object]:
        return {
            "threshold": str(self.threshold),
            "until": self.until,
            "outcome": self.outcome or "waiting",
            "at": self.settled_at,
            "value": self.value,
        }


@dataclass(slots=True)
class _Node:
    """The placements waiting on one node (for one threshold), oldest first."""

    waiting: deque[Watch] = field(default_factory=deque)
    seen_at: float = -math.inf  # the last snapshot with a fresh value of the node


class Exceedances:
    """The placements watched and what their nodes did (`counts`: since the start)."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._queue: deque[Watch] = deque()  # every placement held, oldest first
        self._nodes: dict[Threshold, dict[NodeName, _Node]] = {}  # the waiting ones
        self.counts: Counter[tuple[str, Verdict, Outcome]] = Counter()
        """(policy, verdict, outcome) -> placements settled so."""
        self.waiting = 0

    def __len__(self) -> int:
        return len(self._queue)

    def placed(
        self,
        node: NodeName,
        policy: str,
        verdict: Verdict,
        threshold: Threshold,
        at: float,
        window: float,
    ) -> Watch:
        """Watch a placement made at `at` for `window` seconds."""
        self.close(at)
        while len(self._queue) >= self._keep:
            self._settle_alone(self._queue.popleft(), "dropped", at)
        watch = Watch(node, policy, verdict, threshold, at, at + window)
        self._queue.append(watch)
        self.waiting += 1
        self._nodes.setdefault(threshold, {}).setdefault(node, _Node()).waiting.append(watch)
        return watch

    def close(self, now: float) -> None:
        """Settle the placements whose window closed before `now`."""
        queue = self._queue
        while queue and queue[0].until < now:
            watch = queue.popleft()
            if watch.outcome is None:
                seen = self._nodes[watch.threshold][watch.node].seen_at > watch.at
                self._settle_alone(watch, "under" if seen else "unobserved", watch.until)

    def installed(self, snapshot: Snapshot) -> None:
        taken = snapshot.taken_at
        self.close(taken)
        for threshold, nodes in self._nodes.items():
            series = snapshot.metrics.get(threshold.metric)
            if series is None or series.fetched_at != taken:
                continue  # not fetched by this refresh: old values are no new evidence
            values = series.values
            over = []
            for name, node in nodes.items():
                value = values.get(name)
                if value is None or not math.isfinite(value):
                    continue
                node.seen_at = taken
                if value > threshold.above:
                    over.append((name, node, value))
            for name, node, value in over:
                self._exceeded(nodes, name, node, value, taken)
        for threshold in [t for t, nodes in self._nodes.items() if not nodes]:
            del self._nodes[threshold]

    def _exceeded(
        self, nodes: dict[NodeName, _Node], name: NodeName, node: _Node, value: float, t: float
    ) -> None:
        waiting = node.waiting
        kept: list[Watch] = []
        while waiting:
            watch = waiting.popleft()
            if watch.at >= t:  # placed after the snapshot was taken: not its evidence
                waiting.appendleft(watch)
                break
            if t <= watch.until:
                self._settle(watch, "exceeded", t, value)
            else:  # its window closed before an older one's did: close() takes it
                kept.append(watch)
        waiting.extendleft(reversed(kept))
        if not waiting:
            del nodes[name]

    def _settle(self, watch: Watch, outcome: Outcome, at: float, value: float | None) -> None:
        watch.outcome, watch.settled_at, watch.value = outcome, at, value
        self.waiting -= 1
        self.counts[watch.policy, watch.verdict, outcome] += 1

    def _settle_alone(self, watch: Watch, outcome: Outcome, at: float) -> None:
        if watch.outcome is not None:
            return
        self._settle(watch, outcome, at, None)
        nodes = self._nodes[watch.threshold]
        node = nodes[watch.node]
        node.waiting.remove(watch)  # the first but when the clock stepped back (by identity)
        if not node.waiting:
            del nodes[watch.node]
            if not nodes:
                del self._nodes[watch.threshold]

    def summary(self, thresholds: dict[str, Threshold | None], window: float) -> dict[str, object]:
        """Per verdict and overall, the placements settled with evidence and the share
        exceeded, since the start."""
        by: Counter[tuple[str, Outcome]] = Counter()
        for (_, verdict, outcome), n in self.counts.items():
            by[verdict, outcome] += n
            by["overall", outcome] += n
        return {
            "window": window,
            "thresholds": {p: None if t is None else str(t) for p, t in thresholds.items()},
            "byVerdict": {v: _row(by, v) for v in VERDICTS},
            "overall": _row(by, "overall"),
            "waiting": self.waiting,
            "unobserved": by["overall", "unobserved"],
            "dropped": by["overall", "dropped"],
        }


def _row(by: Counter[tuple[str, Outcome]], verdict: str) -> dict[str, object]:
    exceeded, judged = by[verdict, "exceeded"], by[verdict, "exceeded"] + by[verdict, "under"]
    return {
        "judged": judged,
        "exceeded": exceeded,
        "share": round(exceeded / judged, 4) if judged else None,
    }


def every_count(
    policies: Iterable[str], counts: Counter[tuple[str, Verdict, Outcome]]
) -> dict[tuple[str, str, str], int]:
    """`counts` with a zero for every verdict and outcome of each policy in `policies` (a
    counter a rate divides by exists from the start)."""
    out: dict[tuple[str, str, str], int] = dict.fromkeys(product(policies, VERDICTS, OUTCOMES), 0)
    out.update(counts.items())
    return out
