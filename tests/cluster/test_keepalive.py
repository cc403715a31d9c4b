"""The kept-alive connections (extender.cluster.client.keepalive), against a scripted
loopback server: what is reused, what is not, and each way an answer can end or fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from extender.cluster.client.errors import KubeUnavailable
from extender.cluster.client.keepalive import KeepAlivePool

OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

Script = Callable[[bytes, int], bytes | None]
"""(request, number of the request on its connection) -> the raw answer; None: hang up."""


@dataclass
class Server:
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + (await reader.readexactly(length) if length else b"")


@asynccontextmanager
async def scripted(
    script: Script, hold: asyncio.Event | None = None, hang_up_after: bool = False
) -> AsyncIterator[Server]:
    """A server on 127.0.0.1 answering each request as `script` says; after `hold` is set
    when given; closing the connection after each answer when `hang_up_after`."""
    server = Server()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        server.open_now += 1
        server.most_open = max(server.most_open, server.open_now)
        server.writers.append(writer)
        try:
            n = 0
            while True:
                try:
                    request = await _read_request(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                server.requests.append(request)
                if hold is not None:
                    await hold.wait()
                answer = script(request, n)
                n += 1
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
                if hang_up_after:
                    return
        finally:
            server.open_now -= 1
            writer.close()

    listener = await asyncio.start_server(connection, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()
        for writer in server.writers:
            writer.close()
        await listener.wait_closed()


async def until(condition: Callable[[], bool], turns: int = 10_000) -> None:
    """Yield to the loop until `condition` holds; bounded in turns, never timed."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"still not true after {turns} turns of the loop")


def pool_for(server: Server, limit: int = 4) -> KeepAlivePool:
    return KeepAlivePool(
        host="127.0.0.1", port=server.port, tls=None, server_hostname=None, limit=limit, what="api"
    )


async def post(pool: KeepAlivePool, timeout: float = 5.0) -> tuple[int, bytes]:
    answer = await pool.request("POST", "/p", {"Accept": "application/json"}, b"{}", timeout)
    return answer.status, answer.body


async def test_one_connection_serves_requests_in_turn() -> None:
    async with scripted(lambda request, n: OK) as server:
        pool = pool_for(server)
        for _ in range(5):
            assert await post(pool) == (201, b"{}")
        pool.close()
    assert server.connections == 1 and len(server.requests) == 5
    first = server.requests[0]
    assert first.startswith(b"POST /p HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Content-Length: 2\r\n" in first and first.endswith(b"\r\n\r\n{}")


async def test_a_chunked_answer_is_read_whole() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'3\r\n{"a\r\n5;ext=1\r\n": 1}\r\n0\r\n\r\n'
    )
    async with scripted(lambda request, n: chunked) as server:
        pool = pool_for(server)
        assert await post(pool) == (200, b'{"a": 1}')
        assert await post(pool) == (200, b'{"a": 1}')
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ],
)
async def test_an_empty_answer_completes_at_its_head(answer: bytes) -> None:
    async with scripted(lambda request, n: answer) as server:
        pool = pool_for(server)
        assert (await post(pool))[1] == b""
        assert (await post(pool))[1] == b""
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    ],
)
async def test_an_answer_that_ends_the_connection_is_not_reused(answer: bytes) -> None:
    async with scripted(lambda request, n: answer) as server:
        pool = pool_for(server)
        assert await post(pool) == (201, b"{}")
        assert await post(pool) == (201, b"{}")
    assert server.connections == 2


async def test_a_body_delimited_by_the_close_is_read_to_the_close() -> None:
    answer = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 100_000
    async with scripted(lambda request, n: answer, hang_up_after=True) as server:
        pool = pool_for(server)
        assert await post(pool) == (200, b"x" * 100_000)
        assert pool._idle == []


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async with scripted(lambda request, n: OK) as server:
        pool = pool_for(server)
        assert await post(pool) == (201, b"{}")
        for writer in server.writers:  # the server restarts, say
            writer.close()
            await writer.wait_closed()
        await until(lambda: all(p.closed for p in pool._idle))  # its close reaches us
        assert await post(pool) == (201, b"{}")
    assert server.connections == 2


async def test_a_hang_up_before_the_answer_is_unavailable() -> None:
    async with scripted(lambda request, n: None) as server:
        pool = pool_for(server)
        with pytest.raises(KubeUnavailable, match="closed the connection before answering"):
            await post(pool)
        assert pool._idle == []


async def test_a_truncated_answer_is_unavailable() -> None:
    cut = b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}"
    async with scripted(lambda request, n: cut, hang_up_after=True) as server:
        with pytest.raises(KubeUnavailable, match="closed the connection before answering"):
            await post(pool_for(server))


async def test_a_timeout_closes_its_connection() -> None:
    hold = asyncio.Event()
    async with scripted(lambda request, n: OK, hold=hold) as server:
        pool = pool_for(server)
        with pytest.raises(TimeoutError):
            await post(pool, timeout=0.05)
        hold.set()
        assert pool._idle == []
        assert await post(pool) == (201, b"{}")  # a new connection: the old one is unknown
    assert server.connections == 2


async def test_an_error_answer_keeps_its_body() -> None:
    conflict = b'{"kind":"Status","reason":"Conflict","code":409}'
    answer = b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(conflict), conflict)
    async with scripted(lambda request, n: answer) as server:
        pool = pool_for(server)
        got = await pool.request("POST", "/p", {}, b"{}", 5.0)
        assert (got.status, got.reason, got.body) == (409, "Conflict", conflict)
        assert await post(pool) == (409, conflict)  # the connection stays usable
    assert server.connections == 1


async def test_connections_stay_within_the_limit() -> None:
    hold = asyncio.Event()
    async with scripted(lambda request, n: OK, hold=hold) as server:
        pool = pool_for(server, limit=3)
        tasks = [asyncio.ensure_future(post(pool)) for _ in range(10)]
        await until(lambda: len(server.requests) == 3)
        for _ in range(50):  # the other seven wait for a connection, none is opened
            await asyncio.sleep(0)
        assert server.connections == 3
        hold.set()
        assert [await t for t in tasks] == [(201, b"{}")] * 10
    assert server.most_open <= 3


async def test_a_refused_connection_raises_os_error() -> None:
    async with scripted(lambda request, n: OK) as server:
        port = server.port
    pool = KeepAlivePool(
        host="127.0.0.1", port=port, tls=None, server_hostname=None, limit=2, what="api"
    )
    with pytest.raises(OSError):
        await post(pool)
