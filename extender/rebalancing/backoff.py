"""Pods whose eviction the API refused, and when to ask again (pure: `now` passed in).

A refused pod is not first in line at the next check: it waits `first` seconds (the
rebalance interval) after its first refusal; after each further one the wait is drawn
(errors.backoff, full jitter above `first`) under a ceiling that doubles up to `ceiling`
(10 minutes), so the pods one check saw refused are not all asked again at one check.
An eviction the API accepts, or the pod no longer running, forgets it. Memory is bounded by
the running pods of ours: `prune` drops every pod that is not among them.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass

from extender.errors.backoff import Backoff

CEILING = 600.0
"""The longest wait between two tries of one pod, in seconds."""


@dataclass(frozen=True, slots=True)
class Refusal:
    count: int
    until: float
    reason: str


class RefusalBackoff:
    def __init__(
        self, first: float, ceiling: float = CEILING, rng: random.Random | None = None
    ) -> None:
        self.first = first
        """The wait after a first refusal (the rebalance interval; a reload changes it)."""
        self.ceiling = ceiling
        self._rng = rng or random.Random()
        self._refusals: dict[str, Refusal] = {}

    def policy(self) -> Backoff:
        """The waits between tries of one pod: from `first` (exactly, after one refusal)
        to a ceiling doubling per refusal up to `ceiling`."""
        ceiling = max(self.ceiling, self.first)
        return Backoff(base=self.first, cap=ceiling, floor=self.first, rng=self._rng)

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
        wait = self.policy().wait(count)
        self._refusals[uid] = Refusal(count, now + wait, reason)
        return wait

    def next_try(self, uid: str) -> float | None:
        """When this pod may be asked for again (clock time), or None when not held."""
        refusal = self._refusals.get(uid)
        return None if refusal is None else refusal.until

    def forget(self, uid: str) -> None:
        self._refusals.pop(uid, None)

    def prune(self, running: Collection[str]) -> None:
        """Keep only the pods still running (their UIDs)."""
        for uid in [u for u in self._refusals if u not in running]:
            del self._refusals[uid]
