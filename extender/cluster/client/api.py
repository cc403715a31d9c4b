"""The client's transport: kept-alive connections of our own (keepalive), or one aiohttp
session when a proxy is configured, per event loop; timeouts, bounded retries and auth
headers asked of the configuration on every request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import kubernetes.client
import kubernetes.config
import orjson

from extender.cluster.client.auth import AuthHeaders, proxy_for, ssl_context
from extender.cluster.client.errors import (
    TRANSPORT_ERRORS,
    KubeError,
    KubeUnavailable,
    error_from_status,
    error_from_transport,
    retryable,
)
from extender.cluster.client.keepalive import KeepAlivePool
from extender.errors.backoff import Backoff

_JSON = "application/json"
_USER_AGENT = "decice-extender"
MAX_RETRY_WAIT = 5.0
"""The longest wait before one retry of a call, whatever `backoff` and the attempt."""


# --- the client -----------------------------------------------------------------------


class KubeTransport:
    """Async Kubernetes calls with timeouts, bounded retries and mapped errors.

    `retries` extra attempts follow a 429, 5xx, timeout or connection error, each after a
    wait drawn (errors.backoff, full jitter) under a ceiling of `backoff`, then twice that,
    and so on up to MAX_RETRY_WAIT: the clients of a recovering API server do not all
    come back at the same moment. Each attempt is limited to `timeout` seconds.
    The HTTP session (at most `max_connections` connections, open watches included) opens
    on the first call, in the running event loop; `close()` closes it, and a later call
    opens a new one, in whatever loop runs then. A session left open closes when its loop
    shuts down.
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
        self._configuration = config
        self._timeout = timeout
        self._retries = retries
        self._retry_waits = (
            Backoff(base=backoff, cap=max(MAX_RETRY_WAIT, backoff), rng=rng or random.Random())
            if backoff > 0
            else None
        )
        self._max_connections = max_connections
        self._base = str(config.host or "").rstrip("/")
        url = urlsplit(self._base)
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            port = 0
        if url.scheme not in ("http", "https") or not url.hostname or not port:
            raise KubeError(f"not an API server URL: {self._base!r}", reason="ConfigError")
        self._where = f"{url.hostname}:{port}"
        self._hostname, self._port, self._prefix = url.hostname, port, url.path.rstrip("/")
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            try:
                self._ssl = ssl_context(config)
            except (OSError, ValueError) as exc:
                raise KubeError(f"bad TLS settings: {exc}", reason="ConfigError") from exc
        self._options: dict[str, Any] = {"allow_redirects": False}
        # Sent with each request through a plain-HTTP proxy (aiohttp sends its
        # proxy_headers only on the CONNECT of a tunnel).
        self._static: dict[str, str] = {}
        proxy = proxy_for(config, self._base)
        if proxy is not None:
            self._options["proxy"] = proxy
            if config.proxy_headers:
                if self._ssl is not None:
                    self._options["proxy_headers"] = dict(config.proxy_headers)
                else:
                    self._static.update(config.proxy_headers)
        server_name = config.tls_server_name or (
            config.assert_hostname
            if isinstance(config.assert_hostname, str) and config.assert_hostname
            else None
        )
        if self._ssl is not None and server_name:
            self._options["server_hostname"] = str(server_name)
        if config.username or config.password:
            pair = f"{config.username or ''}:{config.password or ''}".encode()
            self._static["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        self._auth = AuthHeaders(config, self._static)
        self._timeouts = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None
        self._pool: KeepAlivePool | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._pool_guard: AsyncGenerator[None, None] | None = None

    # --- session ---

    def _keepalive(self) -> KeepAlivePool:
        """The kept-alive connections of the running loop, made on first use."""
        loop = asyncio.get_running_loop()
        pool = self._pool
        if pool is not None and self._pool_loop is loop:
            return pool
        self._drop_pool()
        pool = KeepAlivePool(
            host=self._hostname,
            port=self._port,
            tls=self._ssl,
            server_hostname=self._options.get("server_hostname"),
            limit=self._max_connections,
            what=self._where,
        )

        async def close() -> None:
            pool.close()

        self._pool, self._pool_loop = pool, loop
        self._pool_guard = _closed_with_the_loop(close)
        return pool

    def _drop_pool(self) -> None:
        """Close the pool's idle connections in their own loop, if it still runs (a loop
        that ended closed them as it shut down: the guard)."""
        pool, loop = self._pool, self._pool_loop
        self._pool, self._pool_loop, self._pool_guard = None, None, None
        if pool is None or loop is None or loop.is_closed():
            return
        if loop is _running_loop():
            pool.close()
        elif loop.is_running():
            loop.call_soon_threadsafe(pool.close)

    def _http(self) -> aiohttp.ClientSession:
        """The session of the running loop, opened on first use."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None:
            _abandon(session, self._loop)
        self._guard = None
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, ssl=self._ssl if self._ssl is not None else True
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeouts,
            headers={"Accept": _JSON, "User-Agent": _USER_AGENT},
            trust_env=False,
        )
        self._loop = loop
        self._guard = _closed_with_the_loop(self._session.close)
        return self._session

    async def close(self) -> None:
        """Close the connections; the next call opens new ones."""
        self._drop_pool()
        session, loop, guard = self._session, self._loop, self._guard
        self._session, self._loop, self._guard = None, None, None
        if session is None or session.closed:
            return
        if loop is not asyncio.get_running_loop():
            _abandon(session, loop)
        elif guard is not None:
            await guard.aclose()  # closes the session
        else:
            await session.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        """Per-request headers: auth from the configuration's refresh hooks (in-cluster
        token rotation, exec plugins), reused for seconds (auth.AuthHeaders)."""
        headers = self._auth.get()
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    # --- requests ---

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str = _JSON,
        params: Mapping[str, str] | None = None,
        retries: int | None = None,
        final: Collection[int] = (),
    ) -> Any:
        """Send, retrying transient failures (but answers whose status is in `final`);
        the decoded JSON answer."""
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
        if "proxy" not in self._options:  # aiohttp's path speaks to proxies
            status, http_reason, data = await self._lean_once(
                method, path, body, content_type, params
            )
        else:
            status, http_reason, data = await self._aiohttp_once(
                method, path, body, content_type, params
            )
        if status >= 300:
            if status == 401:  # a rotated token: the next request asks the hooks again
                self._auth.expire()
            raise error_from_status(status, data, http_reason)
        if not data:
            return {}
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KubeError(
                f"{method} {path}: answer is not JSON: {exc}", reason="BadResponse"
            ) from exc

    async def _lean_once(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        params: Mapping[str, str] | None,
    ) -> tuple[int, str, bytes]:
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": _JSON, "User-Agent": _USER_AGENT}
        headers.update(self._headers(content_type if body is not None else None))
        try:
            answer = await self._keepalive().request(method, target, headers, body, self._timeout)
        except KubeError:
            raise
        except TRANSPORT_ERRORS as exc:
            raise error_from_transport(exc, self._where, self._timeout) from exc
        return answer.status, answer.reason, answer.body

    async def _aiohttp_once(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        params: Mapping[str, str] | None,
    ) -> tuple[int, str, bytes]:
        headers = self._headers(content_type if body is not None else None)
        try:
            async with self._http().request(
                method,
                self._base + path,
                data=body,
                params=params,
                headers=headers,
                **self._options,
            ) as response:
                data = await response.read()
                return response.status, response.reason or "", data
        except TRANSPORT_ERRORS as exc:
            raise error_from_transport(exc, self._where, self._timeout) from exc


def _closed_with_the_loop(close: Callable[[], Awaitable[None]]) -> AsyncGenerator[None, None]:
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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _abandon(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop | None) -> None:
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
