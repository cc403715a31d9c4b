"""Moving one pod: ask the Eviction API (for real, or `dryRun: ["All"]`), read its answer,
report it (a log line, an Event, the counters) and remember a refusal for the back-off."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Literal, Protocol

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.decisions.model import PodEvent
from extender.errors.causes import describe
from extender.rebalancing.backoff import RefusalBackoff
from extender.rebalancing.plan import Decision

log = logging.getLogger("decice.rebalancer")

Made = Literal["made", "refused", "gone", "stop"]


class RebalanceCounter(Protocol):
    def rebalanced(self, mode: str, outcome: str, count: int = 1) -> None: ...

    def rebalance_cycle(self, result: str) -> None: ...

    def refused(self, reason: str) -> None: ...


def eviction_outcome(exc: Exception) -> str:
    """The counter label of a refused eviction, from the API's answer."""
    if refusal_reason(exc) is not None:
        return "blocked"  # a PodDisruptionBudget (or the API) said wait: never force
    status = getattr(exc, "status", None)
    if status in (404, 409):
        return "gone"  # deleted, or re-created under the same name (UID precondition)
    return "failed"


def refusal_reason(exc: Exception) -> str | None:
    """Why the API refused to evict, when it means "not now": budget (a
    PodDisruptionBudget allows no disruption), budget-not-processed, multiple-budgets (two
    budgets select the pod: 500), throttled (a 429 of the API itself); None otherwise."""
    status = getattr(exc, "status", None)
    message = str(exc)
    if status == 500 and "more than one PodDisruptionBudget" in message:
        return "multiple-budgets"
    if status != 429:
        return None
    details = getattr(exc, "details", None) or {}
    causes = details.get("causes") if isinstance(details, Mapping) else None
    if any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes or ()):
        return "budget-not-processed" if "being processed" in message else "budget"
    return "throttled"


class Evictor:
    """Asks the API to move pods, one at a time, as the leader."""

    def __init__(
        self,
        kube: KubeAPI,
        leader: Leadership,
        counter: RebalanceCounter,
        backoff: RefusalBackoff,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
    ) -> None:
        self._kube = kube
        self._leader = leader
        self._counter = counter
        self._backoff = backoff
        self._clock = clock
        self._instance = instance or socket.gethostname()

    async def move(self, decision: Decision, mode: str) -> Made:
        """Evict one pod (in dry-run, ask whether the API would): "made" when accepted."""
        pod = decision.pod.facts
        dry_run = mode == "dry-run"
        if not dry_run and not self._leader.is_leader:  # lost the lease: stop at once
            log.warning("rebalance: lost the lease; no more evictions this check")
            return "stop"
        try:
            await self._kube.evict(pod.namespace, pod.name, pod.uid, dry_run=dry_run)
        except Exception as exc:
            return self._failed(decision, exc, mode)
        self._backoff.forget(pod.uid)
        if dry_run:
            log.info("rebalance (dry-run): would move %s", decision.text)
            self._counter.rebalanced("dry-run", "would_move")
            await self._event(decision, "WouldMove", f"would move: {decision.text}")
        else:
            self._counter.rebalanced("evict", "evicted")
            log.info("rebalance: evicted %s", decision.text)
            await self._event(decision, "Evicted", f"evicted: {decision.text}")
        return "made"

    def _failed(self, decision: Decision, exc: Exception, mode: str) -> Made:
        pod = decision.pod.facts
        outcome = eviction_outcome(exc)
        self._counter.rebalanced(mode, outcome)
        reason = refusal_reason(exc)
        if reason is not None:
            self._counter.refused(reason)
            wait = self._backoff.refused(pod.uid, reason, self._clock())
            log.info(
                "rebalance: eviction of %s/%s refused (%s), next try in %.0fs: %s",
                pod.namespace,
                pod.name,
                reason,
                wait,
                describe(exc),
            )
            return "refused"
        if outcome == "gone":
            log.info("rebalance: %s/%s is gone: %s", pod.namespace, pod.name, describe(exc))
            return "gone"
        log.warning(
            "rebalance: eviction of %s/%s failed: %s; stopping this check",
            pod.namespace,
            pod.name,
            describe(exc),
        )
        return "stop"

    async def _event(self, decision: Decision, reason: str, note: str) -> None:
        """Best-effort: an Event that cannot be posted is logged, never retried (the log
        line and the counter above already hold the decision)."""
        pod = decision.pod.facts
        event = PodEvent(
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            reason=reason,
            action="Rebalance",
            note=note[:1024],
            time=self._clock(),
            instance=self._instance,
        )
        try:
            await self._kube.create_event(event)
        except Exception as exc:
            log.warning(
                "rebalance: event on %s/%s not posted: %s", pod.namespace, pod.name, describe(exc)
            )
