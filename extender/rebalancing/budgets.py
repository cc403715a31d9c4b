"""PodDisruptionBudgets as the Eviction API will judge them: which pods it would refuse to
evict now, known before asking (pure; the loop lists the budgets).

The API refuses an eviction (429) while a budget selecting the pod allows no disruption,
or has not been processed by the disruption controller since it changed; a pod selected
by two budgets is refused whatever they say (500). Asking anyway would only be refused, and
a refused pod kept first in line would hold its node's eviction slot for good, so the
rebalancer skips such pods before calling the API. Within one check each eviction the API
accepts uses one of its budget's allowed disruptions, as the API counts it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from extender.decisions.labels import LabelSelector, selects
from extender.rebalancing.pods import RunningPod


@dataclass(slots=True)
class Budget:
    namespace: str
    name: str
    selector: LabelSelector | None
    """None: the budget selects no pod (a null selector); {}: every pod of its namespace."""
    allowed: int
    """status.disruptionsAllowed, less the evictions accepted during this check."""
    processed: bool
    """status.observedGeneration has caught up with metadata.generation."""


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
