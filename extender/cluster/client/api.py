"""The client's transport: one aiohttp session per event loop (its own pool of kept-alive
connections, and the proxy when one is configured), the one `request()` every call goes
through, and the `stream()` a watch reads; timeouts, bounded retries and auth headers.

Every call and watch takes this one path, with or without a proxy. The call families
(binding, evicting, events, fetching, patching, reviewing, watching) are module functions
over it, as kopf's `_cogs/clients` keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any

import aiohttp
import kubernetes.client
import orjson

from extender.cluster.client.auth import AuthHeaders, endpoint_of
from extender.cluster.client.errors import (
    TRANSPORT_ERRORS,
    KubeError,
    KubeUnavailable,
    error_from_status,
    error_from_transport,
    retryable,
)
from extender.errors.backoff import Backoff

JSON = "application/json"
_USER_AGENT = "decice-extender"
MAX_RETRY_WAIT = 5.0
"""The longest wait before one retry of a call, whatever `backoff` and the attempt."""


class Transport:
    """Async Kubernetes requests with timeouts, bounded retries and mapped errors.

    `retries` extra attempts follow a 429, 5xx, timeout or connection error, each after a
    wait drawn (errors.backoff, full jitter) under a ceiling of `backoff`, then twice that,
    and so on up to MAX_RETRY_WAIT: the clients of a recovering API server do not all
    come back at the same moment. Each attempt is limited to `timeout` seconds.

    Requests go through one aiohttp session (at most `max_connections` kept-alive
    connections), opened on the first call in the running event loop. `close()` closes
    it, and a later call opens a new one, in whatever loop runs then; a session left open
    closes when its loop shuts down (tests and the CLI run several loops in one process).
    The proxy is the configuration's (kubeconfig `proxy-url`, else $HTTPS_PROXY /
    $HTTP_PROXY and $NO_PROXY, read by the `kubernetes` package as client-go reads them).
    """

    def __init__(
        self,
        configuration: kubernetes.client.Configuration | kubernetes.client.ApiClient,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
        max_connections: int = 16,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: the retries' random source (seeded in tests)."""
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        # Typed loosely: the `kubernetes` package's own annotations are partial.
        config: Any = configuration
        if isinstance(config, kubernetes.client.ApiClient):
            config = config.configuration
        self.timeout = timeout
        self._retries = retries
        self._retry_waits = (
            Backoff(base=backoff, cap=max(MAX_RETRY_WAIT, backoff), rng=rng or random.Random())
            if backoff > 0
            else None
        )
        self.endpoint = endpoint_of(config)
        self._auth = AuthHeaders(config, self.endpoint.static)
        tls = self.endpoint.tls
        self._sessions = LoopSession(
            lambda: aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=max_connections, ssl=tls if tls is not None else True
                ),
                timeout=aiohttp.ClientTimeout(total=timeout),
                headers={"Accept": JSON, "User-Agent": _USER_AGENT},
                trust_env=False,  # the proxy is the configuration's (it read the environment)
            )
        )

    def _session(self) -> aiohttp.ClientSession:
        """The running loop's session, opened on first use."""
        return self._sessions.get()

    async def close(self) -> None:
        """Close the session (its connections); the next call opens a new one."""
        await self._sessions.close()

    # --- requests ---

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        """Per-request headers: auth from the configuration's refresh hooks (in-cluster
        token rotation, exec plugins), reused for seconds (auth.AuthHeaders)."""
        headers = self._auth.get()
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _status_error(self, status: int, body: bytes, reason: str, what: str) -> KubeError:
        """The error an answer with `status` >= 300 raises, its message after `what`."""
        if status == 401:  # a rotated token: the next request asks the hooks again
            self._auth.expire()
        err = error_from_status(status, body, reason)
        err.message = f"{what}: {err.message}" if what else err.message
        return err

    def _transport_error(self, exc: BaseException, what: str = "") -> KubeError:
        """The error a request that got no answer raises."""
        err = error_from_transport(exc, self.endpoint.where, self.timeout)
        err.message = f"{what}: {err.message}" if what else err.message
        return err

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
        retries: int | None = None,
        final: Collection[int] = (),
    ) -> Any:
        """Send, retrying transient failures (but answers whose status is in `final`);
        the decoded JSON answer ({} for an empty one)."""
        retries = self._retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return await self._once(method, path, body, content_type, params)
            except KubeError as err:
                if err.status in final:
                    raise
                if not retryable(err) or attempt >= retries:
                    if isinstance(err, KubeUnavailable):
                        err.message = (
                            f"{method} {path}: {err.message} (gave up after {attempt + 1} attempts)"
                        )
                    raise
            attempt += 1
            if self._retry_waits is not None:
                await asyncio.sleep(self._retry_waits.wait(attempt))

    async def _once(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        params: Mapping[str, str] | None,
    ) -> Any:
        headers = self._headers(content_type if body is not None else None)
        try:
            async with self._session().request(
                method,
                self.endpoint.base + path,
                data=body,
                params=params,
                headers=headers,
                **self.endpoint.options,
            ) as response:
                data = await response.read()
                status, reason = response.status, response.reason or ""
        except TRANSPORT_ERRORS as exc:
            raise self._transport_error(exc) from exc
        if status >= 300:
            raise self._status_error(status, data, reason, "")
        if not data:
            return {}
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KubeError(
                f"{method} {path}: answer is not JSON: {exc}", reason="BadResponse"
            ) from exc

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], *, total: float, what: str
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """GET `path` as a stream, not retried: the response once the server answered 2xx,
        bounded by `total` seconds from the request; a KubeError (its message after `what`)
        when it did not. Reading its body raises aiohttp's errors."""
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.timeout)
        try:
            response = await self._session().get(
                self.endpoint.base + path,
                params=params,
                headers=self._headers(),
                timeout=timeout,
                **self.endpoint.options,
            )
        except TRANSPORT_ERRORS as exc:
            raise self._transport_error(exc, what) from exc
        async with response:
            if response.status >= 300:
                try:
                    data = await response.read()
                except TRANSPORT_ERRORS:
                    data = b""
                raise self._status_error(response.status, data, response.reason or "", what)
            yield response


class LoopSession:
    """The aiohttp session of the running event loop: a call in another loop opens a new
    one, and the old one is closed in its own loop; one left open closes when its loop
    shuts down (a guard the loop's shutdown finalizes), so connections never outlive the
    loop whose transports they are."""

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._open: tuple[aiohttp.ClientSession, asyncio.AbstractEventLoop] | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._open is not None:
            session, owner = self._open
            if owner is loop and not session.closed:
                return session
            self._let_go()
        session = self._make()
        self._open, self._guard = (session, loop), closed_with_the_loop(session.close)
        return session

    async def close(self) -> None:
        if self._open is None:
            return
        if self._open[1] is not asyncio.get_running_loop():
            self._let_go()
            return
        guard, self._open, self._guard = self._guard, None, None
        if guard is not None:
            await guard.aclose()  # closes the session

    def _let_go(self) -> None:
        """Drop the session of another loop: closed there if that loop still runs (one
        that ended closed it as it shut down: the guard)."""
        assert self._open is not None
        session, owner = self._open
        self._open, self._guard = None, None
        if not session.closed and owner.is_running() and not owner.is_closed():
            asyncio.run_coroutine_threadsafe(session.close(), owner)


def closed_with_the_loop(close: Callable[[], Awaitable[None]]) -> AsyncGenerator[None, None]:
    """An async generator, started and left suspended, that awaits `close()` when it is
    finalized: the event loop's shutdown (`asyncio.run`, `asyncio.Runner`, uvicorn) closes
    every async generator still open, so a session whose owner forgot `close()` still
    closes in its own loop, before the loop is gone."""

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
