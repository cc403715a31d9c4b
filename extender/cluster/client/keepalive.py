"""Requests without aiohttp: a few kept-alive HTTP/1.1 connections, one request at a time
on each, the answer framed by linestream's `HttpAnswer`.

A Binding is the one call the service makes per pod, on the scheduler's bind path. Through
aiohttp it cost 173 us of CPU (its request builder, connector, response object and stream
reader, tasks and futures around each); on this protocol 97 us, most of it the TLS record
and the socket (BENCHMARKS.md, "A cheaper client for the API's calls").
Used for every call but the watches (linestream) unless a proxy is configured (then
aiohttp's path, which speaks to proxies).

A connection is reused only after an HTTP/1.1 answer read to its end without
`Connection: close`; one the server closed while idle is dropped when the close arrives,
so the next request opens a new one (an API server restart). A request cancelled or timed
out closes its connection: what is left on it is unknown.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import cast

from extender.cluster.client.errors import KubeUnavailable
from extender.cluster.client.linestream import END, HttpAnswer

NO_BODY = frozenset({204, 304})
"""Statuses whose answers have no body, whatever their headers say (RFC 9112, 6.3)."""


class Answer:
    """A request's answer: status, reason and the whole body."""

    __slots__ = ("body", "reason", "status")

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.body = body


class AnswerProtocol(HttpAnswer, asyncio.Protocol):
    """One connection: `send` writes a request and returns a future its answer completes.
    No request asks for an interim answer (no `Expect`), so none is read."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._body_bytes = bytearray()
        self._done: asyncio.Future[None] | None = None
        self._version = ""  # of the last answer's status line

    def send(self, request: bytes) -> asyncio.Future[None]:
        """Write one request; the future completes with its answer (or its failure)."""
        self._raw.clear()
        self._head_done = self._chunked = False
        self._remaining = None
        self.status, self.reason, self.headers = 0, "", {}
        self.error_body = bytearray()
        self._body_bytes = bytearray()
        self._version = ""
        self._done = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(request)
        return self._done

    def answer(self) -> Answer:
        body = self.error_body if self.status >= 300 else self._body_bytes
        return Answer(self.status, self.reason, bytes(body))

    @property
    def reusable(self) -> bool:
        """After a whole answer: an HTTP/1.1 one that did not ask to close, on a connection
        still open."""
        return (
            not self.closed
            and self._version == "HTTP/1.1"
            and self.headers.get("connection", "").lower() != "close"
        )

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio callbacks --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is no subclass of asyncio.Transport, but has its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        self._raw += data
        try:
            self._parse()
        except BaseException as exc:
            self._finish(exc)
            self.close()

    def eof_received(self) -> bool | None:
        self.closed = True
        if self._body_ended_by_close:
            self._finish(END)  # a close-delimited body ended
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._body_ended_by_close:
            self._finish(END)
        else:
            detail = f": {exc}" if exc is not None else ""
            self._finish(
                KubeUnavailable(
                    f"{self._what}: the server closed the connection before answering{detail}",
                    reason="Unreachable",
                )
            )

    # -- HttpAnswer's hooks --

    def _head_read(self) -> None:
        if self.status in NO_BODY or self._remaining == 0:
            self._remaining = 0
            self._finish(END)

    def _body(self, data: bytes | bytearray) -> None:
        if self._chunked:
            self._body_bytes += data
            return
        if self._remaining is None:  # close-delimited
            self._body_bytes += data
            return
        take = min(len(data), self._remaining)
        self._body_bytes += data[:take]
        self._remaining -= take
        if self._remaining == 0:
            self._finish(END)

    def _flush_last(self) -> None:
        """Nothing kept back: the body is whole when the last chunk arrives."""

    def _finish(self, item: BaseException | object) -> None:
        done = self._done
        if done is None or done.done():
            return
        if isinstance(item, BaseException):
            done.set_exception(item)
        else:
            done.set_result(None)

    def _read_head(self, head: str) -> None:
        self._version = head.split(" ", 1)[0]
        super()._read_head(head)


class KeepAlivePool:
    """At most `limit` connections to one server, idle ones kept for the next request."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        tls: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
        what: str,
    ) -> None:
        self._host, self._port = host, port
        self._tls, self._server_hostname = tls, server_hostname
        self._what = what
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address
        self._host_header = f"Host: {shown}:{port}\r\n".encode("latin-1")
        self._idle: list[AnswerProtocol] = []
        self._slots = asyncio.Semaphore(limit)
        self._limit = limit

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> Answer:
        """Send one request and read its whole answer within `timeout` seconds (the wait
        for a free connection included). Transport failures raise as aiohttp's path does:
        OSError, ssl.SSLError, TimeoutError, or KubeUnavailable when the server closed the
        connection before answering."""
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), self._host_header]
        head += [f"{k}: {v}\r\n".encode("latin-1") for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}\r\n".encode("latin-1"))
        head.append(b"\r\n")
        request = b"".join(head) + (body or b"")
        async with asyncio.timeout(timeout), self._slots:
            protocol = await self._connection()
            try:
                await protocol.send(request)
            except BaseException:
                protocol.close()  # timed out, cancelled or broken: its state is unknown
                raise
            answer = protocol.answer()
            if protocol.reusable and len(self._idle) < self._limit:
                self._idle.append(protocol)
            else:
                protocol.close()
            return answer

    async def _connection(self) -> AnswerProtocol:
        while self._idle:
            protocol = self._idle.pop()
            if not protocol.closed:
                return protocol
        loop = asyncio.get_running_loop()
        if self._tls is not None:
            _, protocol = await loop.create_connection(
                lambda: AnswerProtocol(self._what),
                self._host,
                self._port,
                ssl=self._tls,
                server_hostname=self._server_hostname or self._host,
            )
        else:
            _, protocol = await loop.create_connection(
                lambda: AnswerProtocol(self._what), self._host, self._port
            )
        return protocol

    def close(self) -> None:
        """Close the idle connections (those in use close when their request ends)."""
        idle, self._idle = self._idle, []
        for protocol in idle:
            protocol.close()
