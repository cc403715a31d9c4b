"""A client's connections, one set per event loop: kept-alive connections of our own
(keepalive) for its calls, and an aiohttp session for the calls and watches that go
through a proxy.

Tests and the CLI run several loops in one process, so each set belongs to the loop that
made it: a call in another loop makes a new set, and the old one is closed in its own
loop. A set left open closes when its loop shuts down (a guard the loop's shutdown
finalizes), so connections never outlive the loop whose transports they are.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable

import aiohttp

from extender.cluster.client.keepalive import KeepAlivePool


class KeptAlive:
    """The kept-alive connections (keepalive.KeepAlivePool) of the running loop."""

    def __init__(self, make: Callable[[], KeepAlivePool]) -> None:
        self._make = make
        self._pool: KeepAlivePool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    def pool(self) -> KeepAlivePool:
        """The running loop's pool, made on first use."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        self.drop()
        pool = self._make()

        async def close() -> None:
            pool.close()

        self._pool, self._loop, self._guard = pool, loop, closed_with_the_loop(close)
        return pool

    def drop(self) -> None:
        """Close the pool's idle connections in their own loop, if it still runs (a loop
        that ended closed them as it shut down: the guard)."""
        pool, loop = self._pool, self._loop
        self._pool, self._loop, self._guard = None, None, None
        if pool is None or loop is None or loop.is_closed():
            return
        if loop is running_loop():
            pool.close()
        elif loop.is_running():
            loop.call_soon_threadsafe(pool.close)


class AiohttpSessions:
    """The aiohttp session of the running loop (calls and watches through a proxy)."""

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    def session(self) -> aiohttp.ClientSession:
        """The running loop's session, opened on first use."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None:
            abandon(session, self._loop)
        self._guard = None
        self._session = session = self._make()
        self._loop = loop
        self._guard = closed_with_the_loop(session.close)
        return session

    async def close(self) -> None:
        """Close the session (its connections); the next call opens a new one."""
        session, loop, guard = self._session, self._loop, self._guard
        self._session, self._loop, self._guard = None, None, None
        if session is None or session.closed:
            return
        if loop is not asyncio.get_running_loop():
            abandon(session, loop)
        elif guard is not None:
            await guard.aclose()  # closes the session
        else:
            await session.close()


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def closed_with_the_loop(close: Callable[[], Awaitable[None]]) -> AsyncGenerator[None, None]:
    """An async generator, started and left suspended, that awaits `close()` when it is
    finalized: the event loop's shutdown (`asyncio.run`, `asyncio.Runner`, uvicorn) closes
    every async generator still open, so connections whose owner forgot `close()` still
    close in their own loop, before the loop is gone."""

    async def guard() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await close()

    generator = guard()
    step = generator.asend(None)  # registers it with the running loop's asyncgen hooks
    with contextlib.suppress(StopIteration):
        step.send(None)  # runs to the `yield`: nothing there awaits
    return generator


def abandon(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop | None) -> None:
    """Drop a session of another event loop: close it there if that loop still runs, else
    drop its connections without a loop (a closed loop already lost its transports)."""
    if session.closed:
        return
    if loop is not None and loop.is_running() and not loop.is_closed():
        asyncio.run_coroutine_threadsafe(session.close(), loop)
        return
    connector = session.connector
    session.detach()
    if connector is not None:
        connector._close()
