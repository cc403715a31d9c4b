"""The rebalance mode of the service: the same refresher, engine and watches as the
extender, no verbs, and the rebalancer acting while this replica holds the Lease."""

from __future__ import annotations

from extender.cluster.leader import Leadership
from extender.policy.settings import Settings
from extender.rebalancing.loop import Rebalancer


def for_rebalancing(settings: Settings) -> Settings:
    """The rebalancer's view of the policy: the extender posts the Events of placements
    and requeues turned-away pods; a second writer would only duplicate them."""
    return settings.model_copy(
        update={
            "explain": settings.explain.model_copy(update={"events": False}),
            "requeue": settings.requeue.model_copy(update={"enabled": False}),
        }
    )


def rebalancer_detail(
    settings: Settings, leader: Leadership, rebalancer: Rebalancer
) -> dict[str, object]:
    """/readyz's rebalancer section: the mode, the lease, and what the last check decided."""
    last = rebalancer.last
    detail: dict[str, object] = {"mode": settings.rebalance.mode, "leader": leader.detail()}
    if last is not None:
        counts: dict[str, int] = {}
        for d in last.decisions:
            counts[d.outcome] = counts.get(d.outcome, 0) + 1
        detail["lastCheck"] = {"decisions": counts, "protected": dict(last.skipped)}
    return detail
