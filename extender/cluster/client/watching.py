"""Watch streams: the events of a watch, line by line, bounded in size."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
import orjson

from extender.cluster.client.api import KubeTransport
from extender.cluster.client.errors import (
    TRANSPORT_ERRORS,
    KubeError,
    KubeUnavailable,
    error_from_status,
    error_from_transport,
)
from extender.cluster.client.linestream import watch_lines

#: The longest watch event line accepted (a hostile server cannot exhaust memory).
MAX_WATCH_LINE = 16 * 1024 * 1024
#: A watch stream may be silent for its whole `timeoutSeconds`; the read timeout is longer.
_WATCH_GRACE = 10.0


def _watch_event(line: bytearray, what: str) -> dict[str, Any]:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise KubeError(f"{what}: an event is not JSON: {exc}", reason="BadResponse") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise KubeError(f"{what}: an event without a type", reason="BadResponse")
    return event


class Watching(KubeTransport):
    """Watch streams."""

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        bookmarks: bool = True,
        opened: Callable[[], None] | None = None,
        sieve: Callable[[bytearray], bool] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events of a watch from `resource_version` (`{"type": ..., "object": ...}`),
        `ERROR` events included, until the server ends the stream (at `timeout_seconds`).

        `opened()` is called once the server answered the request with a stream (a real API
        server may then send nothing for minutes on a quiet cluster). `sieve(line)`: False
        for an event line to drop undecoded (cluster.podsieve).

        Not retried: an error answer raises its `KubeError`, a stream that breaks raises
        `KubeUnavailable`. Iterate under `contextlib.aclosing` to free the connection when
        leaving early.
        """
        if timeout_seconds < 1:
            raise ValueError("watch: timeout_seconds must be >= 1")
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        silence = timeout_seconds + max(_WATCH_GRACE, self._timeout)
        # The server ends the stream at `timeout_seconds`; a stream still open `silence`
        # after the request is dead. A bound on the whole stream, not on each read: a read
        # timeout is re-armed on every chunk (a timer cancelled and set per event, a
        # sixth of the stream's Python time in a profile of a churning cluster).
        timeout = aiohttp.ClientTimeout(total=silence, sock_connect=self._timeout)
        what = f"watch {path}"
        if "proxy" not in self._options:  # aiohttp's path speaks to proxies
            async for event in self._lean_watch(path, params, silence, what, opened, sieve):
                yield event
            return
        streaming = False
        try:
            async with self._http().get(
                self._base + path,
                params=params,
                headers=self._headers(),
                timeout=timeout,
                **self._options,
            ) as response:
                if response.status >= 300:
                    if response.status == 401:  # a rotated token: ask the hooks again
                        self._auth.expire()
                    err = error_from_status(response.status, await response.read(), response.reason)
                    err.message = f"{what}: {err.message}"
                    raise err
                streaming = True
                if opened is not None:
                    opened()
                buffer = bytearray()
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    begin = 0
                    while (end := buffer.find(b"\n", begin)) != -1:
                        line = buffer[begin:end]
                        begin = end + 1
                        if line.strip() and (sieve is None or sieve(line)):
                            yield _watch_event(line, what)
                    del buffer[:begin]
                    if len(buffer) > MAX_WATCH_LINE:
                        raise KubeError(
                            f"{what}: an event is longer than {MAX_WATCH_LINE} bytes",
                            reason="BadResponse",
                        )
                if buffer.strip() and (sieve is None or sieve(buffer)):
                    yield _watch_event(buffer, what)
        except TRANSPORT_ERRORS as exc:
            if not streaming:
                err = error_from_transport(exc, self._where, self._timeout)
                err.message = f"{what}: {err.message}"
                raise err from exc
            if isinstance(exc, TimeoutError):
                raise KubeUnavailable(
                    f"{what}: the watch stream was still open {silence:g} s after the request, "
                    f"past its timeoutSeconds ({timeout_seconds}): the connection is dead",
                    reason="Timeout",
                ) from exc
            raise KubeUnavailable(
                f"{what}: the watch stream broke: {exc or type(exc).__name__}",
                reason="Unreachable",
            ) from exc

    async def _lean_watch(
        self,
        path: str,
        params: dict[str, str],
        silence: float,
        what: str,
        opened: Callable[[], None] | None,
        sieve: Callable[[bytearray], bool] | None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The watch through extender.cluster.client.linestream (no proxy)."""

        def status_error(status: int, body: bytes, reason: str) -> BaseException:
            err = self._status_error(status, body, reason)
            err.message = f"{what}: {err.message}"
            return err

        stream = watch_lines(
            host=self._hostname,
            port=self._port,
            tls=self._ssl,
            server_hostname=self._options.get("server_hostname"),
            path=self._prefix + path,
            params=params,
            headers=self._lean_headers(),
            connect_timeout=self._timeout,
            total_timeout=silence,
            what=what,
            max_line=MAX_WATCH_LINE,
            sieve=sieve,
            opened=opened,
            on_status=status_error,
        )
        try:
            async for event in stream:
                yield event
        except KubeError:
            raise
        except (OSError, TimeoutError) as exc:  # no stream yet: connect, TLS, the head
            err = error_from_transport(exc, self._where, self._timeout)
            err.message = f"{what}: {err.message}"
            raise err from exc
        finally:
            await stream.aclose()
