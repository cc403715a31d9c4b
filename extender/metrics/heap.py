"""The long-lived heap kept out of the collector's walks (a stall of every answer in
flight) by `gc.freeze()` after each install; frozen cycles are not freed, so a full
collection runs when resident memory grew `REGROW` times, or every `EVERY` installs."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

REGROW = 1.5
EVERY = 240  # installs: an hour at the shipped 15 s interval


def resident_bytes() -> int | None:
    """This process's resident set (/proc/self/statm), None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class FrozenHeap:
    """One per process (`HEAP`): the collector's generations are the process's."""

    every: int = EVERY
    baseline: int | None = None  # resident bytes right after the last full collection
    since: int = 0  # installs since then
    collections: int = 0

    def installed(self) -> None:
        """After an install: freeze what survived it, after a full collection when due."""
        self.since += 1
        now = resident_bytes()
        grown = now is not None and self.baseline is not None and now > REGROW * self.baseline
        if self.collections == 0 or grown or self.since >= self.every:
            gc.unfreeze()
            gc.collect()
            self.collections += 1
            self.since = 0
            self.baseline = resident_bytes()
        gc.freeze()


HEAP = FrozenHeap()
