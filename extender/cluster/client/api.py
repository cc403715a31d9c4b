"""The client's transport: kept-alive connections of our own (keepalive), or one aiohttp
session when a proxy is configured, per event loop; timeouts, bounded retries and auth
headers asked of the configuration on every request.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp
import kubernetes.client
import kubernetes.config
import orjson

from extender.cluster.client.auth import AuthHeaders
from extender.cluster.client.endpoint import endpoint_of
from extender.cluster.client.errors import (
    TRANSPORT_ERRORS,
    KubeError,
    KubeUnavailable,
    error_from_status,
    error_from_transport,
    retryable,
)
from extender.cluster.client.keepalive import KeepAlivePool
from extender.cluster.client.sessions import AiohttpSessions, KeptAlive
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
    Calls go over kept-alive connections of our own (keepalive, at most
    `max_connections`), or through aiohttp when a proxy is configured; both open on the
    first call, in the running event loop (sessions). `close()` closes them, and a later
    call opens new ones, in whatever loop runs then; connections left open close when
    their loop shuts down.
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
        ep = endpoint_of(config)
        self._base, self._where, self._ssl = ep.base, ep.where, ep.tls
        self._hostname, self._port, self._prefix = ep.host, ep.port, ep.prefix
        self._options, self._static = ep.options, ep.static
        self._auth = AuthHeaders(config, self._static)
        self._kept = KeptAlive(
            lambda: KeepAlivePool(
                host=self._hostname,
                port=self._port,
                tls=self._ssl,
                server_hostname=self._options.get("server_hostname"),
                limit=max_connections,
                what=self._where,
            )
        )
        timeouts = aiohttp.ClientTimeout(total=timeout)
        self._sessions = AiohttpSessions(
            lambda: aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=max_connections, ssl=self._ssl if self._ssl is not None else True
                ),
                timeout=timeouts,
                headers={"Accept": _JSON, "User-Agent": _USER_AGENT},
                trust_env=False,
            )
        )

    def _http(self) -> aiohttp.ClientSession:
        """The running loop's aiohttp session (calls and watches through a proxy)."""
        return self._sessions.session()

    async def close(self) -> None:
        """Close the connections; the next call opens new ones."""
        self._kept.drop()
        await self._sessions.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        """Per-request headers: auth from the configuration's refresh hooks (in-cluster
        token rotation, exec plugins), reused for seconds (auth.AuthHeaders)."""
        headers = self._auth.get()
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _lean_headers(self, content_type: str | None = None) -> dict[str, str]:
        """Every header of a request on our own connections (aiohttp's session adds
        Accept and User-Agent itself)."""
        return {"Accept": _JSON, "User-Agent": _USER_AGENT, **self._headers(content_type)}

    def _status_error(self, status: int, body: bytes, reason: str) -> KubeError:
        """The error an answer with `status` >= 300 raises."""
        if status == 401:  # a rotated token: the next request asks the hooks again
            self._auth.expire()
        return error_from_status(status, body, reason)

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
            raise self._status_error(status, data, http_reason)
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
        headers = self._lean_headers(content_type if body is not None else None)
        try:
            answer = await self._kept.pool().request(method, target, headers, body, self._timeout)
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
