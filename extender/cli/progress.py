"""Progress on stderr for the long commands (simulate, replay): tqdm's bars, which redraw
in place on a terminal and show the count, the rate and an ETA."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from tqdm import tqdm


def counter(total: int, label: str, unit: str, stream: TextIO = sys.stderr) -> tqdm[Any]:
    """A bar over `total` items: `label: 3/24 [00:41<02:57, 0.07run/s]`. Call update(1) as
    each ends; close() when done."""
    return tqdm(total=total, desc=label, unit=unit, file=stream, dynamic_ncols=True)


class Bar:
    """Fractions done of named stages (`bar("node CPU", 0.4)`): one bar per stage, from
    0 to 100 %, with its ETA; a stage's bar closes at 100 %."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self._bars: dict[str, tqdm[Any]] = {}

    def __call__(self, label: str, done: float) -> None:
        bar = self._bars.get(label)
        if bar is None:
            bar = self._bars[label] = tqdm(
                total=100, desc=label, unit="%", file=self.stream, dynamic_ncols=True
            )
        pct = int(100 * min(1.0, max(0.0, done)))
        if pct > bar.n:
            bar.update(pct - bar.n)
        if pct == 100:
            bar.close()
