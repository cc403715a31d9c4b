"""/readyz's metrics section: ready when every fail-closed metric has fresh values
(fail-open metrics always serve, with a neutral score for a node without data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from extender.decisions.model import Snapshot
from extender.policy.policies import Policy


def readiness(
    policies: Iterable[Policy],
    snapshot: Snapshot,
    stale_of: Callable[[Policy], frozenset[str]],
    now: float,
) -> tuple[bool, dict[str, object]]:
    """(ready, metric -> detail); `stale_of(policy)`: the metrics its table counts as stale."""
    detail: dict[str, object] = {}
    ready = True
    for policy in policies:
        stale = stale_of(policy)
        for m in policy.metrics:
            series = snapshot.metrics.get(m.name)
            fetched = series.fetched_at if series else None
            fresh = m.name not in stale
            # fail-closed with no fresh values (or empty) filters every node: not ready.
            empty = series is None or not series.values
            if m.on_missing == "fail-closed" and (not fresh or empty):
                ready = False
            entry = {
                "fresh": fresh,
                "ageSeconds": None if fetched is None else round(now - fetched, 3),
                "nodes": len(series.values) if series else 0,
                "onMissing": m.on_missing,
                "error": series.error if series else None,
            }
            # One entry per metric: fail-closed in any policy decides.
            if m.name not in detail or m.on_missing == "fail-closed":
                detail[m.name] = entry
    return ready, detail
