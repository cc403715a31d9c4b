"""The rebalancer's loop: every `rebalance.interval`, re-check our running pods and move
the ones rebalancing.plan says should move, through the Eviction API.

It runs in `decice-extender rebalance` (its own Deployment), beside the same refresher,
engine and watches as the extender, so its tables are the extender's. Only the replica
holding the Lease acts (cluster.leader); the lease is checked again before every eviction,
so losing it stops evictions at once.

The API decides what is safe, and is asked before anything is reported: every eviction,
the dry run's too (`dryRun: ["All"]`: checked, nothing changed), carries the pod's UID, so
a pod re-created under the same name is never touched, and honours its
PodDisruptionBudgets. The budgets are listed first (rebalancing.budgets), so a pod the API
would refuse is held without asking and the pod beside it moves instead. A refusal all
the same (429) is never forced: the pod waits, its wait doubling from the interval up to
10 minutes (rebalancing.backoff), and the refusal does not use its node's eviction slot:
the next candidate there is tried in the same check. A failed pod list backs the loop
off (the interval doubled, up to 8x); a failed budget list is logged and the check goes on
(the API still judges every eviction).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.decisions.engine import Engine
from extender.decisions.model import NodeName
from extender.decisions.resources import PodError
from extender.errors.causes import describe
from extender.errors.rounds import backoff, check_forever
from extender.rebalancing.backoff import RefusalBackoff
from extender.rebalancing.budgets import Budgets
from extender.rebalancing.evictor import Evictor, RebalanceCounter
from extender.rebalancing.plan import Moves, Plan, decide
from extender.rebalancing.pods import RunningPod, read_running_pod

log = logging.getLogger("decice.rebalancer")


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
        """`rng`: the back-offs' random source (seeded in tests)."""
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
        """Pods whose eviction the API refused, and when to ask again."""
        self._evictor = Evictor(kube, leader, counter, self.backoff, clock, instance)
        self.last: Plan | None = None
        """The last check's plan (for /readyz and tests)."""

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
        budgets = await self._budgets()
        engine = self._engine
        settings = engine.settings
        now = self._clock()
        self.backoff.first = settings.rebalance.interval
        self.backoff.prune({p.facts.uid for p in pods})
        held = {
            p.facts.uid: why
            for p in pods
            if (why := self.backoff.hold(p.facts.uid, now) or budgets.hold(p)) is not None
        }
        tables = {name: engine.table(now, p) for name, p in settings.policy_map.items()}
        result, moves = await asyncio.to_thread(
            decide,
            settings,
            pods,
            tables,
            engine.snapshot,
            self._streaks,
            self._node_cores(),
            now,
            held,
        )
        await self._move_due(result, moves, budgets)
        self._streaks = result.streaks
        for outcome in ("waiting", "held", "stay"):
            count = sum(1 for d in result.decisions if d.outcome == outcome)
            if count:
                self._counter.rebalanced(self.mode, outcome, count)
        for decision in result.decisions:
            if decision.outcome in ("waiting", "held"):
                log.info("rebalance: %s %s", decision.outcome, decision.text)
        self._counter.rebalance_cycle("done")
        self.last = result
        return result

    async def _move_due(self, result: Plan, moves: Moves, budgets: Budgets) -> None:
        """Admit the due pods one at a time and ask the API for each; only a move the API
        accepts uses its limits, so a refusal leaves its node's slot to the next pod."""
        for index, decision in enumerate(result.due):
            admitted = moves.admit(decision)
            hold = budgets.hold(admitted.pod) if admitted.outcome == "move" else None
            if hold is not None:  # an eviction of this check used the budget up
                admitted = replace(admitted, outcome="held", reason=f"{admitted.reason}; {hold}")
            if admitted.outcome != "move":
                result.record(admitted)
                continue
            made = await self._evictor.move(admitted, self.mode)
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

    async def _budgets(self) -> Budgets:
        """The cluster's PodDisruptionBudgets; none when they cannot be listed (logged once
        per failure streak: the API still refuses what they forbid)."""
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
