"""Shadow verdicts: what we would have advised for a placement another scheduler made, and
the summary a person reads. Pure.

The chosen node is judged against our table of that moment, among the nodes the pod could
have gone to: our best (`best`), one of our three best (`top3`), another our filter passes
(`other`) or one it rejects (`rejected`); and the score gap to our best.
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from extender.decisions.labels import selects
from extender.decisions.model import NodeName
from extender.decisions.table import Table
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
            doc["over"] = {
                metric: round(
                    sum(1 for a in ring if (a.values.get(metric) or 0.0) > limit) / kept, 4
                )
                if kept
                else None
                for metric, limit in over.items()
            }
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
    chosen = selection.label_selector
    if chosen is None:
        return True
    labels = meta.get("labels")
    selector = {
        "matchLabels": chosen.match_labels,
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": list(r.values)}
            for r in chosen.match_expressions
        ],
    }
    return selects(selector, labels if isinstance(labels, dict) else {})
