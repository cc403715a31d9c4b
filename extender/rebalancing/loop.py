"""The rebalancer's loop: every `rebalance.interval`, as the Lease holder (checked before
each eviction), evict what rebalancing.plan says should move. Each eviction, dry runs too,
carries the pod's UID for the API to judge against its PodDisruptionBudgets; a pod they
would refuse is held without asking, and a refusal is never forced (the pod backs off,
rebalancing.budgets). Each move is logged, counted and posted as an Event.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Literal, Protocol, TypeVar

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.decisions.engine import Engine
from extender.decisions.model import NodeName, PodEvent
from extender.decisions.resources import PodError
from extender.errors.causes import describe
from extender.errors.rounds import backoff, check_forever
from extender.rebalancing.budgets import Budgets, RefusalBackoff
from extender.rebalancing.plan import Decision, Plan, plan
from extender.rebalancing.pods import read_running_pod, waits_for_room

log = logging.getLogger("decice.rebalancer")

Made = Literal["made", "refused", "gone", "stop"]
T = TypeVar("T")


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
    """Why the API refused to evict, when it means "not now": budget, budget-not-processed,
    multiple-budgets (a 500), throttled (the API's own 429); else None."""
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


async def listed(
    kube: KubeAPI, names: list[str], phase: str, read: Callable[[Any], T | None]
) -> list[T]:
    """The pods of our scheduler `names` in `phase`, read by `read` (None: not wanted)."""
    pods: list[T] = []
    for name in names:
        async for doc in kube.list_pods(f"spec.schedulerName={name},status.phase={phase}"):
            try:
                pod = read(doc)
            except PodError as exc:  # one malformed object never stops the check
                log.warning("rebalance: pod skipped: %s", exc)
                continue
            if pod is not None:
                pods.append(pod)
    return pods


class Rebalancer:
    def __init__(
        self,
        engine: Engine,
        kube: KubeAPI,
        leader: Leadership,
        counter: RebalanceCounter,
        node_cores: Callable[[], Mapping[NodeName, float]],
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._engine = engine
        self._kube = kube
        self._rng = rng or random.Random()
        self._leader = leader
        self._counter = counter
        self._node_cores = node_cores
        self._clock = clock
        self._streaks: dict[str, int] = {}
        self._failures = 0
        self._budgets_failed = False
        self.backoff = RefusalBackoff(engine.settings.rebalance.interval, rng=self._rng)
        self._instance = instance or socket.gethostname()
        self.last: Plan | None = None  # the last check's plan (/readyz)

    @property
    def mode(self) -> str:
        return self._engine.settings.rebalance.mode

    def delay(self) -> float:
        return backoff(self._engine.settings.rebalance.interval, self._failures, self._rng)

    async def run(self) -> None:
        """Check forever; a failed check backs off, a bug in one never stops the next."""
        await check_forever(self.delay, self.check, self._failed, log, "rebalance")

    def _failed(self) -> None:
        self._failures += 1
        self._counter.rebalance_cycle("failed")

    async def check(self) -> Plan | None:
        """One re-check of every running pod of ours; None when not the leader."""
        if not self._leader.is_leader:
            self._counter.rebalance_cycle("skipped")
            log.debug("rebalance check skipped: not the leader")
            return None
        names = sorted(self._engine.settings.scheduler_names)
        now, patience = self._clock(), self._engine.settings.herd_guard.wait_for_room
        try:
            pods = await listed(self._kube, names, "Running", read_running_pod)
            # Our pods waiting for room: their room is not a move's to take.
            waiting = await listed(
                self._kube, names, "Pending", lambda doc: waits_for_room(doc, now, patience)
            )
        except Exception as exc:
            self._failed()
            log.warning(
                "rebalance check skipped: listing pods failed (%s); next in %.0fs",
                describe(exc),
                self.delay(),
            )
            return None
        self._failures = 0
        budgets = await self._budgets()
        engine, settings, now = self._engine, self._engine.settings, self._clock()
        self.backoff.first = settings.rebalance.interval
        self.backoff.prune({p.facts.uid for p in pods})
        held = {
            p.facts.uid: why
            for p in pods
            if (why := self.backoff.hold(p.facts.uid, now) or budgets.hold(p)) is not None
        }
        tables = {name: engine.table(now, p) for name, p in settings.policy_map.items()}
        result = await asyncio.to_thread(
            plan,
            settings,
            pods,
            tables,
            engine.snapshot,
            self._streaks,
            self._node_cores(),
            now,
            held,
            admit=False,
            waiting=waiting,
        )
        await self._move_due(result, budgets)
        self._streaks = result.streaks
        counts = Counter(d.outcome for d in result.decisions)
        for outcome in ("waiting", "held", "stay"):
            if counts[outcome]:
                self._counter.rebalanced(self.mode, outcome, counts[outcome])
        for decision in result.decisions:
            if decision.outcome in ("waiting", "held"):
                log.info("rebalance: %s %s", decision.outcome, decision.text)
        self._counter.rebalance_cycle("done")
        self.last = result
        return result

    async def _move_due(self, result: Plan, budgets: Budgets) -> None:
        """Admit the due pods one at a time and ask the API; only accepted moves use limits."""
        moves = result.limits
        for index, decision in enumerate(result.due):
            admitted = moves.admit(decision)
            hold = budgets.hold(admitted.pod) if admitted.outcome == "move" else None
            if hold is not None:  # an eviction of this check used the budget up
                admitted = replace(admitted, outcome="held", reason=f"{admitted.reason}; {hold}")
            if admitted.outcome != "move":
                result.record(admitted)
                continue
            made = await self._move(admitted)
            if made == "made":
                moves.made(admitted)
                budgets.evicted(admitted.pod)
                result.record(admitted)
            elif made == "refused":
                result.record(replace(admitted, outcome="refused"))
            elif made == "gone":
                result.record(replace(admitted, outcome="stay", reason="gone"))
            else:  # lost the lease, or an unexpected failure: the rest waits for next check
                for rest in result.due[index:]:
                    result.record(replace(rest, outcome="held", reason="check stopped"))
                return

    async def _budgets(self) -> Budgets:
        """The PodDisruptionBudgets; none when they cannot be listed (logged once a streak:
        the API still refuses what they forbid)."""
        try:
            docs = await self._kube.list_pdbs()
        except Exception as exc:
            if not self._budgets_failed:
                log.warning(
                    "rebalance: cannot list PodDisruptionBudgets (%s); evictions they refuse "
                    "are learned from the API's answers (RBAC: list poddisruptionbudgets)",
                    describe(exc),
                )
            self._budgets_failed = True
            return Budgets()
        if self._budgets_failed:
            log.info("rebalance: PodDisruptionBudgets listed again")
        self._budgets_failed = False
        return Budgets(docs)

    async def _move(self, decision: Decision) -> Made:
        """Evict one pod (in dry-run, ask whether the API would): "made" when accepted."""
        pod, mode = decision.pod.facts, self.mode
        dry_run = mode == "dry-run"
        if not dry_run and not self._leader.is_leader:  # lost the lease: stop at once
            log.warning("rebalance: lost the lease; no more evictions this check")
            return "stop"
        try:
            await self._kube.evict(pod.namespace, pod.name, pod.uid, dry_run=dry_run)
        except Exception as exc:
            return self._refused(decision, exc, mode)
        self.backoff.forget(pod.uid)
        done, reason = ("would move", "WouldMove") if dry_run else ("evicted", "Evicted")
        log.info("rebalance%s: %s %s", " (dry-run)" if dry_run else "", done, decision.text)
        self._counter.rebalanced(mode, done.replace(" ", "_"))
        await self._event(decision, reason, f"{done}: {decision.text}")
        return "made"

    def _refused(self, decision: Decision, exc: Exception, mode: str) -> Made:
        pod = decision.pod.facts
        who, why = f"{pod.namespace}/{pod.name}", describe(exc)
        outcome, reason = eviction_outcome(exc), refusal_reason(exc)
        self._counter.rebalanced(mode, outcome)
        if reason is not None:
            self._counter.refused(reason)
            wait = self.backoff.refused(pod.uid, reason, self._clock())
            log.info(
                "rebalance: eviction of %s refused (%s), next try in %.0fs: %s",
                who,
                reason,
                wait,
                why,
            )
            return "refused"
        if outcome == "gone":
            log.info("rebalance: %s is gone: %s", who, why)
            return "gone"
        log.warning("rebalance: eviction of %s failed: %s; stopping this check", who, why)
        return "stop"

    async def _event(self, decision: Decision, reason: str, note: str) -> None:
        """Best-effort: an Event that cannot be posted is logged, never retried."""
        pod = decision.pod.facts
        note, now = note[:1024], self._clock()
        event = PodEvent(
            pod.namespace, pod.name, pod.uid, reason, "Rebalance", note, now, self._instance
        )
        try:
            await self._kube.create_event(event)
        except Exception as exc:
            who = f"{pod.namespace}/{pod.name}"
            log.warning("rebalance: event on %s not posted: %s", who, describe(exc))
