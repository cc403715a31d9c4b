"""Why a pod went where it went, and why a node was filtered, re-evaluated from the
inputs the table had (scoring.evaluate_node): exactly the numbers behind the answer. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from extender.decisions.headroom import fit_rule
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.pods import PodMemo
from extender.decisions.scoring import (
    evaluate_node,
    has_candidates_metric,
    normalise_range,
    range_score,
    score_candidates,
)
from extender.policy.policies import MetricSettings, Policy
from extender.policy.settings import Settings

Document = dict[str, Any]


def _detail(m: MetricSettings, value: float | None, age: float | None) -> str:
    if value is None:
        if m.on_missing != "fail-closed":
            return ""
        if age is None:
            return f"{m.name}: no data"
        return f"{m.name}: no value" if age <= m.max_age else f"{m.name}: data {age:.0f}s old"
    f = m.filter
    if f is not None and f.above is not None and value > f.above:
        return f"{m.name}={value:.4g} > {f.above:g}"
    if f is not None and f.below is not None and value < f.below:
        return f"{m.name}={value:.4g} < {f.below:g}"
    return ""


def explain_nodes(
    policy: Policy,
    snapshot: Snapshot,
    stale: frozenset[str],
    herd: Mapping[NodeName, float],
    nodes: Sequence[NodeName],
    now: float,
    too_small: AbstractSet[NodeName] = frozenset(),
) -> list[Document]:
    """One row per node, best score first: each metric's raw and normalised value, weight
    and herd load, the score, the verdict and the reason with its values. `too_small`: the
    nodes the decision turned away for the pod's size (they pass the table)."""
    evals = [evaluate_node(policy, snapshot, n, stale, herd, now) for n in nodes]
    rule = fit_rule(policy) if too_small else None
    if has_candidates_metric(policy):
        scores = score_candidates(policy, evals)
    else:
        scores = [range_score(policy, e) for e in evals]
    rows: list[Document] = []
    for node, e, score in zip(nodes, evals, scores, strict=True):
        metrics: dict[str, Document] = {}
        details: list[str] = []
        for m, value in zip(policy.metrics, e.values, strict=True):
            series = snapshot.metrics.get(m.name)
            raw = series.values.get(node) if series is not None else None
            load = herd.get(node, 0.0) if m.name == policy.herd_metric else 0.0
            fetched = series.fetched_at if series is not None else None
            metrics[m.name] = {
                "value": raw,
                "herdLoad": round(load, 4),
                "normalised": (
                    round(normalise_range(m, value), 4)
                    if value is not None and m.normalize == "range"
                    else None
                ),
                "weight": m.weight,
            }
            age = None if fetched is None else now - fetched
            if e.reason is not None and (detail := _detail(m, value, age)):
                details.append(detail)
        rows.append(
            {
                "node": node,
                "score": score,
                "passed": e.reason is None,
                "reason": e.reason,
                "detail": "; ".join(details) or None,
                "metrics": metrics,
            }
        )
        if rule is not None and e.reason is None and node in too_small:
            rows[-1].update(passed=False, reason=rule.reason, detail="too little room for this pod")
    rows.sort(key=lambda r: (not r["passed"], -r["score"], r["node"]))
    return rows


def _filtered(rows: Sequence[Document]) -> Counter[str]:
    """How many rows each reason filtered."""
    return Counter(r["reason"] for r in rows if r["reason"] is not None)


def placement_note(
    rows: Sequence[Document],
    node: NodeName,
    metrics: Sequence[str],
    candidates: int | None = None,
    rejected: int | None = None,
) -> str:
    """The Event note on a placed pod: `placed on node-3: score 9/10 (cpu 0.10, memory
    0.20); 5 candidates, 1 filtered (cpu above 0.9); next best node-1 score 6`.
    `candidates` and `rejected` override the counts when `rows` are not every candidate."""
    filtered = _filtered(rows)
    chosen = next((r for r in rows if r["node"] == node), None)
    text = f"placed on {node}"
    if chosen is not None:
        values = ", ".join(
            f"{m} {v:.2f}" for m in metrics if (v := chosen["metrics"][m]["value"]) is not None
        )
        text += f": score {chosen['score']}/10" + (f" ({values})" if values else "")
    total = len(rows) if candidates is None else candidates
    count = sum(filtered.values()) if rejected is None else rejected
    text += f"; {total} candidates, {count} filtered"
    if filtered:
        reasons = ", ".join(r.removeprefix("decice: ") for r, _ in filtered.most_common(3))
        text += f" ({reasons})"
    runner = next((r for r in rows if r["passed"] and r["node"] != node), None)
    if runner is not None:
        text += f"; next best {runner['node']} score {runner['score']}"
    return text[:1024]  # an Event note holds at most 1 KB


def explain_pod(settings: Settings, memo: PodMemo, now: float) -> Document:
    """The last decision for one pod, as /explain answers it."""
    facts = memo.facts
    doc: Document = {
        "pod": {"namespace": facts.namespace, "name": facts.name, "uid": facts.uid},
        "schedulerName": facts.scheduler_name,
        "policy": memo.policy.name if memo.policy is not None else facts.policy,
        "decidedAt": memo.at,
        "secondsAgo": round(now - memo.at, 3),
        "placedOn": memo.node or None,
        "candidates": memo.asked,
        "filtered": len(memo.rejected),
    }
    if memo.shortlisted is not None:
        doc["shortlisted"] = memo.shortlisted
        doc["shortlist"] = (
            f"the filter passed only our best {memo.shortlisted} of the nodes that pass "
            "(prioritize.shortlist; the best one while pods we count without bindVerb are "
            "not seen bound yet): kube-scheduler scored those"
        )
    if memo.expected:
        doc["expected"] = memo.expected
    snapshot = memo.snapshot
    if memo.policy is None:
        doc["detail"] = (
            f"the pod names the policy {facts.policy!r}, which this extender does not have "
            f"(policies: {', '.join(settings.policy_map)}): every node was rejected"
        )
        return doc
    if snapshot is None:
        doc["detail"] = (
            "the per-node figures of this decision are gone (its snapshot was replaced "
            "several refreshes ago); the counts above are what is kept"
        )
        return doc
    doc["snapshot"] = {
        "takenAt": snapshot.taken_at,
        "ageSecondsAtDecision": round(memo.at - snapshot.taken_at, 3),
    }
    if memo.candidates is not None:
        nodes = list(memo.candidates)
    else:
        nodes = sorted({n for series in snapshot.metrics.values() for n in series.values})
        doc["candidatesListed"] = "the snapshot's nodes (the request named more than 256)"
    rows = explain_nodes(
        memo.policy, snapshot, memo.stale, memo.herd, nodes, memo.at, too_small=memo.rejected
    )
    doc["filteredBy"] = dict(_filtered(rows))
    limit = settings.explain.max_nodes
    shown = rows[:limit]
    if memo.node and all(r["node"] != memo.node for r in shown):
        shown += [r for r in rows if r["node"] == memo.node]
    doc["nodes"] = shown
    doc["omitted"] = len(rows) - len(shown)
    return doc
