"""The client's transport: one aiohttp session per event loop, the one `request()` every
call goes through, and the `stream()` a watch reads.
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
Config = kubernetes.client.Configuration | kubernetes.client.ApiClient  # auth.py loads it
MAX_RETRY_WAIT = 5.0  # the longest wait before one retry of a call


def non_empty(call: str, **values: str) -> None:
    """ValueError unless each of `values` is a non-empty string (they go into URLs)."""
    for arg, value in values.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{call}: {arg} must be a non-empty string, got {value!r}")


class Transport:
    """Async Kubernetes requests with timeouts, mapped errors and `retries` after a 429,
    5xx, timeout or connection error, each after a jittered wait doubling from `backoff`
    to MAX_RETRY_WAIT (a recovering API server's clients do not come back at once)."""

    def __init__(
        self,
        configuration: Config,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
        max_connections: int = 16,
        rng: random.Random | None = None,
    ) -> None:
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

    async def close(self) -> None:
        """Close the session (its connections); the next call opens a new one."""
        await self._sessions.close()

    def _status_error(self, status: int, body: bytes, reason: str, what: str) -> KubeError:
        if status == 401:  # a rotated token: the next request asks the hooks again
            self._auth.expire()
        return _named(error_from_status(status, body, reason), what)

    def _transport_error(self, exc: BaseException, what: str = "") -> KubeError:
        return _named(error_from_transport(exc, self.endpoint.where, self.timeout), what)

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
        """The decoded JSON answer ({} if empty); transient failures retried, not `final`."""
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
        headers = self._auth.get()
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            async with self._sessions.get().request(
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
        """GET `path` as a stream, not retried, bounded by `total` seconds (else KubeError)."""
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.timeout)
        try:
            response = await self._sessions.get().get(
                self.endpoint.base + path,
                params=params,
                headers=self._auth.get(),
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


def _named(err: KubeError, what: str) -> KubeError:
    err.message = f"{what}: {err.message}" if what else err.message
    return err


class LoopSession:
    """The running event loop's aiohttp session, closed in its own loop: by `close()`, by
    that loop's shutdown, or once dropped for another loop's (tests and the CLI run several
    loops): its guard's finalizer closes it there (PEP 525's asyncgen hooks)."""

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._open: tuple[aiohttp.ClientSession, object, AsyncGenerator[None, None]] | None = None

    def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._open is None or self._open[1] is not loop or self._open[0].closed:
            session = self._make()
            self._open = (session, loop, closed_with_the_loop(session.close))
        return self._open[0]

    async def close(self) -> None:
        opened, self._open = self._open, None
        if opened is not None and opened[1] is asyncio.get_running_loop():
            await opened[2].aclose()  # closes the session


def closed_with_the_loop(close: Callable[[], Awaitable[None]]) -> AsyncGenerator[None, None]:
    """An async generator left suspended, that awaits `close()` when the loop's shutdown
    finalizes it (as it does every open async generator)."""

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
