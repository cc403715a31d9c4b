"""Why the Eviction API would refuse a pod now (pure): `Budgets`, its PodDisruptionBudgets,
known before asking so a refused pod holds no eviction slot; `RefusalBackoff`, a refused
pod's wait: one interval, then drawn (errors.backoff) under a ceiling doubling to `CEILING`.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from extender.decisions.labels import LabelSelector, selects
from extender.errors.backoff import Backoff
from extender.rebalancing.pods import RunningPod


@dataclass(slots=True)
class Budget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None selects no pod; {} every pod of its namespace
    allowed: int  # status.disruptionsAllowed, less this check's evictions
    processed: bool  # status.observedGeneration caught up with metadata.generation


def read_budget(doc: Any) -> Budget | None:
    """A policy/v1 PodDisruptionBudget as the Eviction API reads it; None when malformed."""
    if not isinstance(doc, dict):
        return None
    meta, spec, status = (doc.get(k) or {} for k in ("metadata", "spec", "status"))
    if not all(isinstance(part, dict) for part in (meta, spec, status)):
        return None
    namespace, name = meta.get("namespace"), meta.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    selector = spec.get("selector")
    allowed = status.get("disruptionsAllowed", 0)
    generation = meta.get("generation", 0)
    observed = status.get("observedGeneration", 0)
    if not isinstance(allowed, int) or not isinstance(generation, int):
        return None
    return Budget(
        namespace=namespace,
        name=name,
        selector=selector if isinstance(selector, dict) else None,
        allowed=allowed,
        processed=isinstance(observed, int) and observed >= generation,
    )


class Budgets:
    """The budgets of the cluster, by namespace, for one check."""

    def __init__(self, docs: Iterable[Any] = ()) -> None:
        self._by_namespace: dict[str, list[Budget]] = {}
        for doc in docs:
            budget = read_budget(doc)
            if budget is not None:
                self._by_namespace.setdefault(budget.namespace, []).append(budget)

    def covering(self, pod: RunningPod) -> list[Budget]:
        return [
            b
            for b in self._by_namespace.get(pod.facts.namespace, ())
            if selects(b.selector, pod.labels)
        ]

    def hold(self, pod: RunningPod) -> str | None:
        """Why the Eviction API would refuse to evict `pod` now, or None."""
        budgets = self.covering(pod)
        if len(budgets) > 1:
            names = ", ".join(sorted(b.name for b in budgets))
            return f"PodDisruptionBudgets {names} all select it (the Eviction API refuses)"
        for b in budgets:
            if not b.processed:
                return f"PodDisruptionBudget {b.name} is not processed yet"
            if b.allowed <= 0:
                return f"PodDisruptionBudget {b.name} allows no disruption now"
        return None

    def evicted(self, pod: RunningPod) -> None:
        """The API accepted an eviction of `pod`: its budget allows one disruption less."""
        for b in self.covering(pod):
            b.allowed -= 1


CEILING = 600.0  # the longest wait between two tries of one pod, in seconds


@dataclass(frozen=True, slots=True)
class Refusal:
    count: int
    until: float
    reason: str


class RefusalBackoff:
    def __init__(self, first: float, rng: random.Random | None = None) -> None:
        self.first = first  # the rebalance interval; a reload changes it
        self._rng = rng or random.Random()
        self._refusals: dict[str, Refusal] = {}

    def __len__(self) -> int:
        return len(self._refusals)

    def hold(self, uid: str, now: float) -> str | None:
        """Why not to ask for this pod now (its last refusal and the time left), or None."""
        refusal = self._refusals.get(uid)
        if refusal is None or now >= refusal.until:
            return None
        return f"eviction refused ({refusal.reason}); next try in {refusal.until - now:.0f}s"

    def refused(self, uid: str, reason: str, now: float) -> float:
        """The API refused to evict this pod: the seconds until it is asked again."""
        count = self._refusals[uid].count + 1 if uid in self._refusals else 1
        cap = max(CEILING, self.first)
        wait = Backoff(base=self.first, cap=cap, floor=self.first, rng=self._rng).wait(count)
        self._refusals[uid] = Refusal(count, now + wait, reason)
        return wait

    def next_try(self, uid: str) -> float | None:
        refusal = self._refusals.get(uid)
        return None if refusal is None else refusal.until

    def forget(self, uid: str) -> None:
        self._refusals.pop(uid, None)

    def prune(self, running: Collection[str]) -> None:
        """Keep only the pods still running (their UIDs)."""
        for uid in [u for u in self._refusals if u not in running]:
            del self._refusals[uid]
