"""The bind verb's Kubernetes calls, on a thread and event loop of their own.

kube-scheduler binds pod N in a goroutine while it already filters and scores pod N+1.
On one event loop, the bind's API call (aiohttp building the request and reading the
answer, ~160 us of Python a call) would run between those verbs and delay them. Here
the calls run on a dedicated thread with its own loop and its own client (an aiohttp
session belongs to one loop); the verbs' loop hands the arguments over and awaits the
result without running any of it. The binder's guard, de-duplication and herd-guard
reservations stay on the verbs' loop, single-threaded: only the API's I/O moves.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from extender.decisions.pods import PodFacts

log = logging.getLogger("decice.bind")

T = TypeVar("T")

#: How long a stop waits for the thread's loop to close its client and end.
STOP_SECONDS = 5.0


class BindCalls(Protocol):
    """What the binder asks of the API (extender.cluster.client.KubeClient has it)."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str: ...
    async def get_pod(self, namespace: str, name: str) -> PodFacts: ...
    async def close(self) -> None: ...


class BindThread:
    """`bind` and `get_pod` of a client made by `make_client`, run on the thread.

    The thread starts on the first call (a service that never binds never starts it) and
    ends with `close()`. A caller cancelled while waiting (shutdown) cancels the call on
    the thread too."""

    def __init__(self, make_client: Callable[[], BindCalls], name: str = "decice-bind") -> None:
        self._make_client = make_client
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: BindCalls | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        return await self._call(lambda client: client.bind(namespace, name, uid, node))

    async def get_pod(self, namespace: str, name: str) -> PodFacts:
        return await self._call(lambda client: client.get_pod(namespace, name))

    async def _call(self, call: Callable[[BindCalls], Awaitable[T]]) -> T:
        loop, client = self._started()

        async def on_the_thread() -> T:
            return await call(client)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_the_thread(), loop))

    def _started(self) -> tuple[asyncio.AbstractEventLoop, BindCalls]:
        if self._loop is None or self._client is None:
            self._start()
        assert self._loop is not None and self._client is not None
        return self._loop, self._client

    def _start(self) -> None:
        client = self._make_client()
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                # The client's session closes with its loop's async generators.
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=run, name=self._name, daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._client, self._thread = loop, client, thread

    async def close(self) -> None:
        """Close the client on the thread's loop, then end the thread (idempotent)."""
        loop, client, thread = self._loop, self._client, self._thread
        self._loop, self._client, self._thread = None, None, None
        if loop is None or client is None or thread is None:
            return
        closing = asyncio.run_coroutine_threadsafe(client.close(), loop)
        try:
            await asyncio.wait_for(asyncio.wrap_future(closing), STOP_SECONDS)
        except Exception as exc:  # a stop step never blocks the rest (timeouts included)
            log.warning("bind thread: closing its client failed: %r", exc)
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, STOP_SECONDS)
        if thread.is_alive():
            log.warning("bind thread still running %.0f s after the stop", STOP_SECONDS)
