"""Watch streams, read line by line from aiohttp's stream reader (as kopf reads its
watches); lines a watch filter drops are never decoded, each is bounded in size.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
import orjson

from extender.cluster.client.api import Transport
from extender.cluster.client.errors import TRANSPORT_ERRORS, KubeError, KubeUnavailable

MAX_WATCH_LINE = 16 * 1024 * 1024  # a hostile server cannot exhaust memory
_WATCH_GRACE = 10.0  # beyond `timeoutSeconds`, which a watch may be silent for
BATCH = 0.1
"""Seconds left unread after a small read: a busy cluster's events come a batch a wake-up."""
BATCH_BYTES = 64 * 1024  # never paused after a read this big: the server drops slow watchers


def _watch_event(line: bytearray, what: str) -> dict[str, Any]:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise KubeError(f"{what}: an event is not JSON: {exc}", reason="BadResponse") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise KubeError(f"{what}: an event without a type", reason="BadResponse")
    return event


async def watch(
    api: Transport,
    path: str,
    *,
    resource_version: str,
    timeout_seconds: int,
    bookmarks: bool = True,
    opened: Callable[[], None] | None = None,
    sieve: Callable[[bytearray], bool] | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """The events of a watch from `resource_version`, `ERROR` events included, until the
    server ends it. `opened()`: once the server answered; `sieve(line)`: False to drop a
    line undecoded. Not retried: `KubeError`, or `KubeUnavailable` for a broken stream."""
    if timeout_seconds < 1:
        raise ValueError("watch: timeout_seconds must be >= 1")
    params = {
        "watch": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": str(timeout_seconds),
    }
    if bookmarks:
        params["allowWatchBookmarks"] = "true"
    # A bound on the whole stream: one still open `silence` after the request is dead.
    silence = timeout_seconds + max(_WATCH_GRACE, api.timeout)
    what = f"watch {path}"
    async with api.stream(path, params, total=silence, what=what) as response:
        if opened is not None:
            opened()
        body = response.content
        buffer = bytearray()
        try:
            while chunk := await body.readany():
                buffer += chunk
                begin = 0
                while (end := buffer.find(b"\n", begin)) != -1:
                    line = buffer[begin:end]
                    begin = end + 1
                    if line and not line.isspace() and (sieve is None or sieve(line)):
                        yield _watch_event(line, what)
                del buffer[:begin]
                if len(buffer) > MAX_WATCH_LINE:
                    raise KubeError(
                        f"{what}: an event is longer than {MAX_WATCH_LINE} bytes",
                        reason="BadResponse",
                    )
                if len(chunk) < BATCH_BYTES:
                    await unread(response, BATCH)
        except TRANSPORT_ERRORS as exc:
            if isinstance(exc, TimeoutError):
                raise KubeUnavailable(
                    f"{what}: the watch stream was still open {silence:g} s after the "
                    f"request, past its timeoutSeconds ({timeout_seconds}): the connection "
                    "is dead",
                    reason="Timeout",
                ) from exc
            raise KubeUnavailable(
                f"{what}: the watch stream broke: {exc or type(exc).__name__}",
                reason="Unreachable",
            ) from exc
        if buffer and not buffer.isspace() and (sieve is None or sieve(buffer)):
            yield _watch_event(buffer, what)


async def unread(response: aiohttp.ClientResponse, seconds: float) -> None:
    """Leave the connection unread for `seconds`: its transport paused, and its socket
    woken only once BATCH_BYTES wait (SO_RCVLOWAT), so events arriving meanwhile (a
    segment at a time) do not each wake the loop to be read into the TLS layer."""
    connection = response.connection
    transport = connection.transport if connection is not None else None
    if transport is None or transport.is_closing():
        await asyncio.sleep(seconds)
        return
    sock = transport.get_extra_info("socket")
    transport.pause_reading()
    lowered = _wake_at(sock, BATCH_BYTES)
    try:
        await asyncio.sleep(seconds)
    finally:
        if lowered:
            _wake_at(sock, 1)
        if not transport.is_closing():
            transport.resume_reading()


def _wake_at(sock: Any, size: int) -> bool:
    """Set the socket's SO_RCVLOWAT (readable once `size` bytes are queued); False when it
    cannot be set (no socket, or a platform without it)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, size)
    except (AttributeError, OSError):
        return False
    return True
