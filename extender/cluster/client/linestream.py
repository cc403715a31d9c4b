"""A watch stream read without aiohttp: one connection, HTTP/1.1, the body's lines sifted
as they arrive, only the kept events decoded and handed to the consumer.

Through aiohttp, each event of a busy watch cost a wake-up of the whole stack: the TLS
layer reading into a fresh 256 KiB buffer (uvloop's copied read path: an allocation the
size of the read, per record), aiohttp's parser and stream reader, a future, a task step,
then the consumer's generator. This protocol is a `BufferedProtocol` (the TLS layer
decrypts into its buffer), decodes the chunked body and splits lines in its callback, and
runs the sieve there: a dropped event wakes no task at all. Used for every watch unless a
proxy is configured (then aiohttp's path, which speaks to proxies).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, cast
from urllib.parse import urlencode

import orjson

from extender.cluster.client.errors import KubeError, KubeUnavailable

BUFFER = 256 * 1024
"""Bytes the transport may write into the protocol's buffer at once."""
MAX_HEAD = 64 * 1024
"""The longest status line and headers accepted."""
PAUSE_AT = 10_000
"""Kept events waiting for the consumer before the connection stops being read."""
BATCH = 0.1
"""Seconds the connection is not read after a small delivery, so the events of a busy
cluster are taken a batch at a time (one wake-up of this protocol, one decryption pass
for several events); a watch event is late by that much at most. 0.1 s against 0.05:
40 against 45 ms of CPU per 1,000 updates beyond the watch off (BENCHMARKS.md, "The pod
watch pays only for what it uses")."""
BATCH_BYTES = 64 * 1024
"""A delivery this big is never followed by a pause: the stream is busier than batches
can hold, and the API server drops a watcher that falls behind."""

Sieve = Callable[[bytearray], bool]


class _End:
    """The stream ended cleanly (the last chunk, or the server closed a close-delimited
    body)."""


END = _End()


class HttpAnswer:
    """The HTTP/1.1 framing of one answer: the status line and headers, then a chunked,
    sized or close-delimited body handed on to `_body`; an error answer's body kept."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._raw = bytearray()  # bytes not parsed yet (head, chunk framing)
        self._head_done = False
        self._chunked = False
        self._remaining: int | None = None  # bytes left of the current chunk / the body
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.error_body = bytearray()

    def _body(self, data: bytes | bytearray) -> None:
        raise NotImplementedError

    def _flush_last(self) -> None:
        raise NotImplementedError

    def _finish(self, item: BaseException | _End) -> None:
        raise NotImplementedError

    def _head_read(self) -> None:
        """The head is read (status, reason, headers)."""

    @property
    def _body_ended_by_close(self) -> bool:
        return self._head_done and not self._chunked and self._remaining is None

    def _parse(self) -> None:
        if not self._head_done:
            end = self._raw.find(b"\r\n\r\n")
            if end == -1:
                if len(self._raw) > MAX_HEAD:
                    raise KubeError(
                        f"{self._what}: the answer's head is too long", reason="BadResponse"
                    )
                return
            self._read_head(bytes(self._raw[:end]).decode("latin-1"))
            del self._raw[: end + 4]
        if self.status >= 300:
            self._error_body()
            return
        if self._chunked:
            self._dechunk()
        else:
            self._body(self._raw)
            self._raw.clear()

    def _read_head(self, head: str) -> None:
        status_line, *lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise KubeError(f"{self._what}: not an HTTP answer", reason="BadResponse")
        self.status, self.reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        for line in lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        length = self.headers.get("content-length")
        if not self._chunked and length is not None and length.isdigit():
            self._remaining = int(length)
        self._head_done = True
        self._head_read()

    def _error_body(self) -> None:
        """An error answer: its whole body, then the stream ends (the caller raises)."""
        if self._chunked:
            self._dechunk(into_error=True)
            return
        self.error_body += self._raw
        self._raw.clear()
        if self._remaining is not None and len(self.error_body) >= self._remaining:
            self._finish(END)

    def _dechunk(self, into_error: bool = False) -> None:
        raw = self._raw
        pos = 0
        while True:
            if self._remaining is None or self._remaining == 0:
                if self._remaining == 0:  # the CRLF after a chunk's data
                    if len(raw) - pos < 2:
                        break
                    pos += 2
                    self._remaining = None
                end = raw.find(b"\r\n", pos)
                if end == -1:
                    if len(raw) - pos > 1024:
                        raise KubeError(f"{self._what}: bad chunk framing", reason="BadResponse")
                    break
                size_text = bytes(raw[pos:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise KubeError(
                        f"{self._what}: bad chunk size {size_text[:20]!r}", reason="BadResponse"
                    ) from None
                pos = end + 2
                if size == 0:
                    del raw[:pos]
                    self._flush_last()
                    self._finish(END)
                    return
                self._remaining = size
            take = min(self._remaining, len(raw) - pos)
            if take <= 0:
                break
            data = raw[pos : pos + take]
            pos += take
            self._remaining -= take
            if into_error:
                self.error_body += data
            else:
                self._body(data)
        del raw[:pos]


class WatchProtocol(HttpAnswer, asyncio.BufferedProtocol):
    """One watch response: the head, then the body's lines as events (see module doc)."""

    def __init__(self, what: str, max_line: int, sieve: Sieve | None) -> None:
        super().__init__(what)
        self._max_line = max_line
        self._sieve = sieve
        self._buffer = bytearray(BUFFER)
        self._view = memoryview(self._buffer)
        self._lines = bytearray()  # the body, de-chunked, not yet split
        self.items: deque[dict[str, Any] | BaseException | _End] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.head_ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self._paused = False  # for the consumer's backlog
        self._batching = False  # for a batch

    # -- asyncio callbacks --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is no subclass of asyncio.Transport, but has its methods.
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self._raw += self._view[:nbytes]
        try:
            self._parse()
        except BaseException as exc:
            self._finish(exc)
            return
        if BATCH > 0 and nbytes < BATCH_BYTES and self._head_done:
            self._pause_for_batch()

    def _pause_for_batch(self) -> None:
        transport = self.transport
        if self._batching or transport is None or transport.is_closing():
            return
        self._batching = True
        transport.pause_reading()
        asyncio.get_running_loop().call_later(BATCH, self._batch_over)

    def _batch_over(self) -> None:
        self._batching = False
        transport = self.transport
        if not self._paused and transport is not None and not transport.is_closing():
            transport.resume_reading()

    def _head_read(self) -> None:
        if not self.head_ready.done():
            self.head_ready.set_result(None)

    def eof_received(self) -> bool | None:
        if self._body_ended_by_close:
            self._flush_last()
            self._finish(END)  # a close-delimited body ended
        else:
            self._finish(
                KubeUnavailable(f"{self._what}: the watch stream broke", reason="Unreachable")
            )
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self._finish(
                KubeUnavailable(
                    f"{self._what}: the watch stream broke: {exc}", reason="Unreachable"
                )
            )
        elif self._body_ended_by_close:
            self._flush_last()
            self._finish(END)
        else:
            self._finish(
                KubeUnavailable(f"{self._what}: the watch stream broke", reason="Unreachable")
            )

    def _body(self, data: bytes | bytearray) -> None:
        lines = self._lines
        begin = len(lines)
        lines += data
        start = 0
        sieve = self._sieve
        items = self.items
        # Only the new bytes can hold a newline the earlier ones did not.
        while (end := lines.find(b"\n", begin)) != -1:
            line = lines[start:end]
            start = begin = end + 1
            if line.strip() and (sieve is None or sieve(line)):
                items.append(self._decode(line))
        del lines[:start]
        if len(lines) > self._max_line:
            raise KubeError(
                f"{self._what}: an event is longer than {self._max_line} bytes",
                reason="BadResponse",
            )
        self._wake()

    def _flush_last(self) -> None:
        line = self._lines
        if line.strip() and (self._sieve is None or self._sieve(line)):
            self.items.append(self._decode(line))
        self._lines = bytearray()

    def _decode(self, line: bytearray) -> dict[str, Any] | BaseException:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return KubeError(f"{self._what}: an event is not JSON: {exc}", reason="BadResponse")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return KubeError(f"{self._what}: an event without a type", reason="BadResponse")
        return event

    def _finish(self, item: BaseException | _End) -> None:
        if self.items and self.items[-1] is END:
            return
        if isinstance(item, BaseException) and any(
            isinstance(i, BaseException) for i in self.items
        ):
            return
        self.items.append(item)
        if not self.head_ready.done():
            if isinstance(item, BaseException):
                self.head_ready.set_exception(item)
                self.head_ready.exception()  # read here: the caller may be gone
            else:
                self.head_ready.set_result(None)
        self._wake()
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        if self.items and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        if len(self.items) >= PAUSE_AT and not self._paused and self.transport is not None:
            self._paused = True
            if not self._batching:
                self.transport.pause_reading()

    async def next_item(self) -> dict[str, Any] | BaseException | _End:
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        item = self.items.popleft()
        if self._paused and len(self.items) < PAUSE_AT // 2 and self.transport is not None:
            self._paused = False
            if not self._batching:
                self.transport.resume_reading()
        return item


async def watch_lines(
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    server_hostname: str | None,
    path: str,
    params: Mapping[str, str],
    headers: Mapping[str, str],
    connect_timeout: float,
    total_timeout: float,
    what: str,
    max_line: int,
    sieve: Sieve | None,
    opened: Callable[[], None] | None,
    on_status: Callable[[int, bytes, str], BaseException],
) -> AsyncGenerator[dict[str, Any], None]:
    """The kept events of one watch request (see module doc). `on_status(status, body,
    reason)` makes the exception an error answer raises."""
    loop = asyncio.get_running_loop()
    protocol = WatchProtocol(what, max_line, sieve)
    kwargs: dict[str, Any] = {}
    if tls is not None:
        kwargs = {"ssl": tls, "server_hostname": server_hostname or host}
    transport, _ = await asyncio.wait_for(
        loop.create_connection(lambda: protocol, host, port, **kwargs), connect_timeout
    )
    expired = loop.call_later(
        total_timeout,
        protocol._finish,
        KubeUnavailable(
            f"{what}: the watch stream was still open {total_timeout:g} s after the request, "
            "past its timeoutSeconds: the connection is dead",
            reason="Timeout",
        ),
    )
    try:
        target = f"{path}?{urlencode(params)}" if params else path
        lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await asyncio.wait_for(asyncio.shield(protocol.head_ready), connect_timeout)
        if protocol.status >= 300:
            while True:
                item = await protocol.next_item()
                if not isinstance(item, dict):
                    break
            raise on_status(protocol.status, bytes(protocol.error_body), protocol.reason)
        if opened is not None:
            opened()
        while True:
            item = await protocol.next_item()
            if isinstance(item, _End):
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        expired.cancel()
        transport.close()
