"""The long-lived heap kept out of the collector's walks: `gc.freeze()` after each install.

At 15,000 nodes a refresh allocates enough containers (decoded answers, the snapshot, a
table per policy) to trigger a full collection of the whole heap most times, and a full
collection walks every object the service holds (the installed snapshot and tables, the
memory of pods, the watches' state) with the GIL held, a stall of every answer in flight
(BENCHMARKS.md, "The scale of a metrics answer", has its length). Frozen objects are not
walked; they are still freed by reference counting as soon as nothing holds them (the
snapshot and tables a later install replaces), so only garbage *cycles* among them would
stay. The snapshot and tables hold none, but other long-lived objects (connections,
tasks) may form one when they end. So the service unfreezes, collects once and freezes
again (the one stall, rare) when its resident memory has grown past `REGROW` times what
it was after the last such collection, and at least every `EVERY` installs: a leak
through frozen cycles is bounded by both, and a growing cluster just moves the baseline.
(The frozen count itself is not read: `gc.get_freeze_count()` walks the whole frozen
list, a stall of its own.) `tests/metrics/test_heap.py` soaks it.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

REGROW = 1.5
"""A full collection when the resident memory exceeds this times its size after the last."""
EVERY = 240
"""...and at least every this many installs (an hour at the shipped 15 s interval)."""


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

    regrow: float = REGROW
    every: int = EVERY
    baseline: int | None = None
    """Resident bytes right after the last full collection (None: none yet)."""
    since: int = 0
    """Installs since the last full collection."""
    collections: int = 0
    """Full collections it ran (the first install's, then each regrowth or period)."""

    def installed(self) -> None:
        """After an install: freeze what survived it; collect everything first when the
        process grew, or when it has not for `every` installs."""
        self.since += 1
        now = resident_bytes()
        grown = now is not None and self.baseline is not None and now > self.regrow * self.baseline
        if self.collections == 0 or grown or self.since >= self.every:
            gc.unfreeze()
            gc.collect()
            self.collections += 1
            self.since = 0
            self.baseline = resident_bytes()
        gc.freeze()


HEAP = FrozenHeap()
