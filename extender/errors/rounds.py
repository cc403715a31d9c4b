"""Background loops that check on an interval (backed off after failed rounds; a failing
round never stops the next), and the pace of loops that write to the API one at a time."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable

from extender.errors.backoff import Backoff

FIRST_BACKOFF_FACTOR = 2
"""After one failed round the wait is drawn between one interval and this many."""
MAX_BACKOFF_FACTOR = 8
"""A failing loop waits at most this many intervals between two rounds."""


def backoff(interval: float, failures: int, rng: random.Random) -> float:
    """`interval` while rounds succeed; after failures, jittered from 2 intervals up to 8."""
    if failures <= 0:
        return interval
    first, most = FIRST_BACKOFF_FACTOR * interval, MAX_BACKOFF_FACTOR * interval
    return Backoff(base=first, cap=most, floor=interval, rng=rng).wait(failures)


async def check_forever(
    delay: Callable[[], float],
    check: Callable[[], Awaitable[object]],
    failed: Callable[[], None],
    log: logging.Logger,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Wait `delay()`, run `check()`, forever; a round that raises is logged and counted."""
    while True:
        await sleep(delay())
        try:
            await check()
        except asyncio.CancelledError:
            raise
        except Exception:
            failed()
            log.exception("%s check failed unexpectedly", what)


class Pace:
    """At most `per_second` starts a second: `await pace.turn(per_second)` before each."""

    def __init__(
        self,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sleep = sleep
        self._clock = clock
        self._last = -math.inf

    async def turn(self, per_second: float) -> None:
        wait = self._last + 1.0 / per_second - self._clock()
        if wait > 0:
            await self._sleep(wait)
        self._last = self._clock()
