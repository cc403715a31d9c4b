"""One back-off policy for every retry loop: exponential with full jitter (AWS's
"Exponential Backoff And Jitter"; client-go's `wait.Backoff`), so replicas that failed
together do not retry together."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

MAX_EXPONENT = 60
"""`2 ** (n - 1)` stops growing here: long past any cap, short of a float overflow."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """`base`: the ceiling after the first failure (seconds), doubled per further failure
    up to `cap`; `floor`: the shortest wait."""

    base: float
    cap: float
    floor: float = 0.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.base > 0:
            raise ValueError(f"back-off base must be > 0, got {self.base}")
        if self.cap < self.base:
            raise ValueError(f"back-off cap ({self.cap}) must be >= its base ({self.base})")
        if not 0 <= self.floor <= self.cap:
            raise ValueError(f"back-off floor must be within 0..cap ({self.cap}), got {self.floor}")

    def ceiling(self, failures: int) -> float:
        """The longest wait after `failures` consecutive failures (at least 1)."""
        exponent = min(max(failures, 1) - 1, MAX_EXPONENT)
        return min(self.cap, self.base * 2.0**exponent)

    def wait(self, failures: int) -> float:
        """The wait after `failures` consecutive failures: uniform in [floor, ceiling]."""
        high = max(self.ceiling(failures), self.floor)
        return self.floor + self.rng.random() * (high - self.floor)
