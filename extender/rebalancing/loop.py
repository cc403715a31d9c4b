"""The rebalancer's loop: every `rebalance.interval`, re-check our running pods and move
the ones rebalance.plan says should move, through the Eviction API.

It runs in `decice-extender rebalance` (its own Deployment), beside the same refresher,
engine and watches as the extender, so its tables are the extender's. Only the replica
holding the Lease acts (leader.py); the lease is checked again before every eviction, so
losing it stops evictions at once. In dry-run (the default) it logs, posts an Event and
counts what it would move and evicts nothing.

The API decides what is safe: an eviction honours the pod's PodDisruptionBudgets and a
refusal (429) means wait: the pod stays a candidate and is tried again next check, never
forced. Every eviction carries the pod's UID, so a pod re-created under the same name is
never touched. A failed pod list backs the loop off (the interval doubled, up to 8x).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from extender.decisions.engine import Engine
from extender.decisions.model import NodeName, PodEvent
from extender.decisions.pods import PodError
from extender.errors.causes import describe
from extender.rebalancing.plan import Decision, Plan, RunningPod, plan, read_running_pod

log = logging.getLogger("decice.rebalancer")

MAX_BACKOFF_FACTOR = 8


class RebalanceAPI(Protocol):
    """What the rebalancer asks of the Kubernetes API (extender.cluster.client.KubeClient)."""

    def list_pods(
        self, field_selector: str, *, limit: int = 500
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def evict(self, namespace: str, name: str, uid: str) -> None: ...

    async def create_event(self, event: PodEvent) -> None: ...


class Leadership(Protocol):
    @property
    def is_leader(self) -> bool: ...


class RebalanceCounter(Protocol):
    def rebalanced(self, mode: str, outcome: str, count: int = 1) -> None: ...

    def rebalance_cycle(self, result: str) -> None: ...


def eviction_outcome(exc: Exception) -> str:
    """The counter label of a refused eviction, from the API's answer."""
    status = getattr(exc, "status", None)
    if status == 429:
        return "blocked"  # a PodDisruptionBudget: wait, never force
    if status in (404, 409):
        return "gone"  # deleted, or re-created under the same name (UID precondition)
    return "failed"


class Rebalancer:
    def __init__(
        self,
        engine: Engine,
        kube: RebalanceAPI,
        leader: Leadership,
        counter: RebalanceCounter,
        node_cores: Callable[[], Mapping[NodeName, float]],
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
    ) -> None:
        self._engine = engine
        self._kube = kube
        self._leader = leader
        self._counter = counter
        self._node_cores = node_cores
        self._clock = clock
        self._instance = instance or socket.gethostname()
        self._streaks: dict[str, int] = {}
        self._failures = 0
        self.last: Plan | None = None
        """The last check's plan (for /readyz and tests)."""

    @property
    def mode(self) -> str:
        return self._engine.settings.rebalance.mode

    def delay(self) -> float:
        factor = min(1 << self._failures, MAX_BACKOFF_FACTOR)
        return self._engine.settings.rebalance.interval * factor

    async def run(self) -> None:
        """Check forever; a failed check backs off, a bug in one never stops the next."""
        while True:
            await asyncio.sleep(self.delay())
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                self._failures += 1
                self._counter.rebalance_cycle("failed")
                log.exception("rebalance check failed unexpectedly")

    async def check(self) -> Plan | None:
        """One re-check of every running pod of ours; None when not the leader."""
        if not self._leader.is_leader:
            self._counter.rebalance_cycle("skipped")
            log.debug("rebalance check skipped: not the leader")
            return None
        try:
            pods = await self._running_pods()
        except Exception as exc:
            self._failures += 1
            self._counter.rebalance_cycle("failed")
            log.warning(
                "rebalance check skipped: listing pods failed (%s); next in %.0fs",
                describe(exc),
                self.delay(),
            )
            return None
        self._failures = 0
        engine = self._engine
        settings = engine.settings
        now = self._clock()
        tables = {name: engine.table(now, p) for name, p in settings.policy_map.items()}
        result = await asyncio.to_thread(
            plan, settings, pods, tables, engine.snapshot, self._streaks, self._node_cores(), now
        )
        self._streaks = result.streaks
        for outcome in ("waiting", "held", "stay"):
            count = sum(1 for d in result.decisions if d.outcome == outcome)
            if count:
                self._counter.rebalanced(self.mode, outcome, count)
        for decision in result.decisions:
            if decision.outcome in ("waiting", "held"):
                log.info("rebalance: %s %s", decision.outcome, decision.text)
        for decision in result.moves:
            if not await self._move(decision):
                break
        self._counter.rebalance_cycle("done")
        self.last = result
        return result

    async def _running_pods(self) -> list[RunningPod]:
        pods: list[RunningPod] = []
        for name in sorted(self._engine.settings.scheduler_names):
            selector = f"spec.schedulerName={name},status.phase=Running"
            async for doc in self._kube.list_pods(selector):
                try:
                    pods.append(read_running_pod(doc))
                except PodError as exc:  # one malformed object never stops the check
                    log.warning("rebalance: pod skipped: %s", exc)
        return pods

    async def _move(self, decision: Decision) -> bool:
        """Evict (or, in dry-run, report) one pod; False stops this check's moves."""
        pod = decision.pod.facts
        if self.mode == "dry-run":
            log.info("rebalance (dry-run): would move %s", decision.text)
            self._counter.rebalanced("dry-run", "would_move")
            await self._event(decision, "WouldMove", f"would move: {decision.text}")
            return True
        if not self._leader.is_leader:  # lost the lease during this check: stop at once
            log.warning("rebalance: lost the lease; no more evictions this check")
            return False
        try:
            await self._kube.evict(pod.namespace, pod.name, pod.uid)
        except Exception as exc:
            outcome = eviction_outcome(exc)
            self._counter.rebalanced("evict", outcome)
            if outcome == "blocked":
                self._streaks[pod.uid] = decision.checks  # still due: try again next check
                log.info(
                    "rebalance: eviction of %s/%s refused, will retry: %s",
                    pod.namespace,
                    pod.name,
                    describe(exc),
                )
                return True
            if outcome == "gone":
                log.info("rebalance: %s/%s is gone: %s", pod.namespace, pod.name, describe(exc))
                return True
            log.warning(
                "rebalance: eviction of %s/%s failed: %s; stopping this check",
                pod.namespace,
                pod.name,
                describe(exc),
            )
            return False
        self._counter.rebalanced("evict", "evicted")
        log.info("rebalance: evicted %s", decision.text)
        await self._event(decision, "Evicted", f"evicted: {decision.text}")
        return True

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
