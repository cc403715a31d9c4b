"""Overload taints: which nodes should carry `decice.io/overloaded`, decided from the
metrics. Pure (the writer is cluster.overload).

Cluster Autoscaler and Karpenter simulate scheduling from requests and taints only: a
taint they read. A node is tainted after a watched metric stays above its threshold for
`forSeconds`, untainted after every one stays below `threshold - hysteresis` as long.
Missing or stale data stops a node's clock; at most `maxTaintedFraction` of the nodes are
tainted, the hottest first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import metric_value

TAINT_KEY = "decice.io/overloaded"

Trend = Literal["hot", "cool", "between"]


@dataclass(frozen=True, slots=True)
class Watched:
    """A metric that taints: its name, its filter threshold and its hysteresis."""

    name: str
    above: float
    hysteresis: float
    max_age: float


@dataclass(frozen=True, slots=True)
class Change:
    node: NodeName
    action: Literal["taint", "untaint"]
    metric: str
    value: float | None
    reason: str


@dataclass(slots=True)
class _Clock:
    trend: Trend
    since: float


@dataclass(slots=True)
class OverloadState:
    """Since when each node has been hot, or cool, on the evidence of fresh data."""

    clocks: dict[NodeName, _Clock] = field(default_factory=dict)


def trend_of(
    node: NodeName, watched: Sequence[Watched], snapshot: Snapshot, now: float
) -> tuple[Trend, str, float] | None:
    """(hot / cool / between, the hottest metric, its value) of `node` now; None when a
    watched metric has no fresh value for it."""
    hottest: tuple[float, str, float] | None = None
    all_cool = True
    for w in watched:
        series = snapshot.metrics.get(w.name)
        # A failed refresh or data older than maxAge is no evidence (scoring still uses it).
        stale = (
            series is None
            or series.fetched_at is None
            or series.error is not None
            or now - series.fetched_at > w.max_age
        )
        value = metric_value(series, node, stale, 0.0)
        if value is None:  # missing, stale or not finite
            return None
        margin = value - w.above
        if hottest is None or margin > hottest[0]:
            hottest = (margin, w.name, value)
        if value >= w.above - w.hysteresis:
            all_cool = False
    assert hottest is not None
    margin, metric, value = hottest
    if margin > 0:
        return "hot", metric, value
    return ("cool" if all_cool else "between"), metric, value


def decide(
    state: OverloadState,
    watched: Sequence[Watched],
    snapshot: Snapshot,
    nodes: Sequence[NodeName],
    tainted: Mapping[NodeName, str],
    for_seconds: float,
    max_fraction: float,
    now: float,
) -> list[Change]:
    """The taints to add and remove now (`tainted`: node -> the metric of our taint on it);
    updates `state`'s clocks."""
    if not watched:
        return []
    known = set(nodes)
    for gone in [n for n in state.clocks if n not in known]:
        del state.clocks[gone]
    hot: list[tuple[float, Change]] = []
    changes: list[Change] = []
    for node in nodes:
        seen = trend_of(node, watched, snapshot, now)
        if seen is None:
            continue  # no fresh data: the clock stops, the taint stays as it is
        trend, metric, value = seen
        clock = state.clocks.get(node)
        if clock is None or clock.trend != trend:
            clock = state.clocks[node] = _Clock(trend, now)
        held = now - clock.since >= for_seconds
        threshold = next(w.above for w in watched if w.name == metric)
        if node in tainted:
            if trend == "cool" and held:
                reason = f"every metric below its threshold - hysteresis for {for_seconds:g}s"
                changes.append(Change(node, "untaint", tainted[node], value, reason))
        elif trend == "hot" and held:
            reason = f"{metric}={value:.4g} above {threshold:g} for {for_seconds:g}s"
            hot.append((value - threshold, Change(node, "taint", metric, value, reason)))
    # The cap counts the taints that stay: hottest first, up to maxTaintedFraction.
    cap = math.floor(max_fraction * len(nodes))
    staying = len(tainted) - sum(1 for c in changes if c.action == "untaint")
    room = max(cap - staying, 0)
    hot.sort(key=lambda item: (-item[0], item[1].node))
    changes += [change for _, change in hot[:room]]
    return changes
