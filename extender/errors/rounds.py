"""Background loops that check on an interval: the wait, doubled per failed round up to a
cap, and a round that fails (or has a bug) never stopping the next one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

MAX_BACKOFF_FACTOR = 8
"""A failing loop waits at most this many intervals between two rounds."""


def backoff(interval: float, failures: int) -> float:
    """The wait before the next round: `interval`, doubled per consecutive failure."""
    return interval * min(1 << failures, MAX_BACKOFF_FACTOR)


async def check_forever(
    delay: Callable[[], float],
    check: Callable[[], Awaitable[object]],
    failed: Callable[[], None],
    log: logging.Logger,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Wait `delay()`, run `check()`, forever; a round that raises is logged with its
    traceback and counted through `failed()`, and the loop goes on."""
    while True:
        await sleep(delay())
        try:
            await check()
        except asyncio.CancelledError:
            raise
        except Exception:
            failed()
            log.exception("%s check failed unexpectedly", what)
