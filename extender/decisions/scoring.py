"""Filter verdicts and 0..10 scores from a snapshot, evaluated once per node per table
(table.build_table), or per request for `normalize: candidates`. Pure.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.decisions.model import MetricSeries, NodeName, Snapshot
from extender.policy.policies import MetricSettings, Policy

MAX_SCORE = 10  # MaxExtenderPriority
NEUTRAL = 0.5  # normalised contribution of a fail-open metric with no usable value


def stale_metrics(policy: Policy, snapshot: Snapshot, now: float) -> frozenset[str]:
    """The policy's metrics whose data is missing or older than their maxAge at `now`."""
    out = set()
    for m in policy.metrics:
        series = snapshot.metrics.get(m.name)
        if series is None or series.fetched_at is None or now - series.fetched_at > m.max_age:
            out.add(m.name)
    return frozenset(out)


def metric_value(
    series: MetricSeries | None, node: NodeName, stale: bool, extra: float = 0.0
) -> float | None:
    """The usable value of one metric on one node, or None when missing or stale."""
    if stale or series is None:
        return None
    value = series.values.get(node)
    if value is None or not math.isfinite(value):
        return None
    return value + extra


# Filter reasons are categories with no values in them: kube-scheduler groups node reasons
# by their exact text in the FailedScheduling event ("4990 decice: cpu above 0.9").


def missing_reason(m: MetricSettings, series: MetricSeries | None, now: float) -> str:
    if series is not None and series.fetched_at is not None and now - series.fetched_at > m.max_age:
        return f"decice: {m.name} data older than {m.max_age:g}s"
    return f"decice: {m.name} data missing"


def threshold_reason(m: MetricSettings, value: float) -> str | None:
    f = m.filter
    if f is None:
        return None
    if f.above is not None and value > f.above:
        return f"decice: {m.name} above {f.above:g}"
    if f.below is not None and value < f.below:
        return f"decice: {m.name} below {f.below:g}"
    return None


def normalise_range(m: MetricSettings, value: float) -> float:
    x = (value - m.min) / (m.max - m.min)
    x = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
    return 1.0 - x if m.direction == "lower" else x


def to_score(weighted: float, total_weight: float) -> int:
    """Weighted mean of 0..1 parts -> integer 0..10, half up (deterministic)."""
    return max(0, min(MAX_SCORE, math.floor(MAX_SCORE * weighted / total_weight + 0.5)))


@dataclass(frozen=True, slots=True)
class NodeEval:
    reason: str | None
    range_part: float
    """Sum of weight * normalised value over `range` metrics."""
    values: tuple[float | None, ...]
    """Per metric in policy order: usable value (herd load added) or None."""


def evaluate_node(
    policy: Policy,
    snapshot: Snapshot,
    node: NodeName,
    stale: frozenset[str],
    extra: Mapping[NodeName, float],
    now: float,
) -> NodeEval:
    herd = policy.herd_metric
    reason: str | None = None
    part = 0.0
    values: list[float | None] = []
    for m in policy.metrics:
        series = snapshot.metrics.get(m.name)
        add = extra.get(node, 0.0) if m.name == herd else 0.0
        value = metric_value(series, node, m.name in stale, add)
        values.append(value)
        if value is None:
            if m.on_missing == "fail-closed" and reason is None:
                reason = missing_reason(m, series, now)
            if m.normalize == "range":
                part += m.weight * (0.0 if m.on_missing == "fail-closed" else NEUTRAL)
            continue
        if reason is None:
            reason = threshold_reason(m, value)
        if m.normalize == "range":
            part += m.weight * normalise_range(m, value)
    return NodeEval(reason=reason, range_part=part, values=tuple(values))


def score_candidates(policy: Policy, evals: Sequence[NodeEval]) -> list[int]:
    """Scores for one request's nodes, each `candidates` metric rescaled over them: the
    best gets 1 and the worst 0 (all 1 when equal)."""
    parts = [e.range_part for e in evals]
    for i, m in enumerate(policy.metrics):
        if m.normalize != "candidates":
            continue
        present = [v for e in evals if (v := e.values[i]) is not None]
        lo, hi = (min(present), max(present)) if present else (0.0, 0.0)
        span = hi - lo
        missing = 0.0 if m.on_missing == "fail-closed" else NEUTRAL
        for j, e in enumerate(evals):
            v = e.values[i]
            if v is None:
                x = missing
            elif span <= 0.0:
                x = 1.0
            else:
                x = (hi - v) / span if m.direction == "lower" else (v - lo) / span
            parts[j] += m.weight * x
    total = sum(m.weight for m in policy.metrics)
    return [to_score(p, total) for p in parts]


def has_candidates_metric(policy: Policy) -> bool:
    return any(m.normalize == "candidates" for m in policy.metrics)


def range_score(policy: Policy, e: NodeEval) -> int:
    return to_score(e.range_part, sum(m.weight for m in policy.metrics))


def top_hosts(
    names: Sequence[NodeName], scores: Sequence[int], k: int, start: int = 0
) -> list[int]:
    """Indexes of the best k nodes, in request order; ties at the cut are broken from a
    per-pod `start` on (wrapping), so a burst spreads over all the tied nodes."""
    n = len(names)
    if k >= n:
        return list(range(n))
    order = sorted(range(n), key=lambda i: (-scores[i], (i - start) % n))
    return sorted(order[:k])


def tie_start(uid: str, n: int) -> int:
    """Where `top_hosts` starts breaking ties for this pod: crc32 of its UID, the same in
    every process (unlike hash()), so one pod always gets one answer."""
    return zlib.crc32(uid.encode("utf-8", "surrogatepass")) % n if n else 0
