"""The client's connections (aiohttp's pool, as extender.cluster.client.api configures it),
against a scripted loopback server: what is reused, what is not, and each way an answer
can end or fail, as KubeClient reports it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import kubernetes.client
import pytest

from extender.cluster.client import KubeClient, watching
from extender.cluster.client.errors import KubeUnavailable

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


@asynccontextmanager
async def client_for(
    server: Server, *, retries: int = 0, timeout: float = 5.0, max_connections: int = 4
) -> AsyncIterator[KubeClient]:
    configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{server.port}")
    client = KubeClient(
        configuration,
        timeout=timeout,
        retries=retries,
        backoff=0.01,
        max_connections=max_connections,
    )
    try:
        yield client
    finally:
        await client.close()


async def post(client: KubeClient) -> object:
    return await client.request("POST", "/p", body=b"{}")


async def test_one_connection_serves_requests_in_turn() -> None:
    async with scripted(lambda request, n: OK) as server, client_for(server) as client:
        for _ in range(5):
            assert await post(client) == {}
    assert server.connections == 1 and len(server.requests) == 5
    first = server.requests[0]
    assert first.startswith(b"POST /p HTTP/1.1\r\n") and first.endswith(b"\r\n\r\n{}")


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}",
    ],
)
async def test_an_answer_that_ends_the_connection_is_not_reused(answer: bytes) -> None:
    async with scripted(lambda request, n: answer) as server, client_for(server) as client:
        assert await post(client) == {}
        assert await post(client) == {}
    assert server.connections == 2


async def test_a_body_delimited_by_the_close_is_read_to_the_close() -> None:
    body = b'{"x": "' + b"x" * 100_000 + b'"}'
    answer = b"HTTP/1.1 200 OK\r\n\r\n" + body
    async with (
        scripted(lambda request, n: answer, hang_up_after=True) as server,
        client_for(server) as client,
    ):
        assert await post(client) == {"x": "x" * 100_000}
        assert await post(client) == {"x": "x" * 100_000}
    assert server.connections == 2


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    """An API server restart closes the kept-alive connections: the next call works."""
    async with scripted(lambda request, n: OK) as server, client_for(server, retries=1) as client:
        assert await post(client) == {}
        for writer in server.writers:
            writer.close()
            await writer.wait_closed()
        await until(lambda: server.open_now == 0)
        assert await post(client) == {}
    assert server.connections == 2


async def test_a_hang_up_before_the_answer_is_unavailable_and_retried() -> None:
    answers: list[bytes | None] = [None, OK]
    async with scripted(lambda request, n: answers.pop(0)) as server:
        async with client_for(server) as client:
            with pytest.raises(KubeUnavailable, match="closed the connection before answering"):
                await post(client)
        async with client_for(server, retries=1) as client:
            assert await post(client) == {}


async def test_a_truncated_answer_is_unavailable() -> None:
    cut = b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}"
    async with (
        scripted(lambda request, n: cut, hang_up_after=True) as server,
        client_for(server) as client,
    ):
        with pytest.raises(KubeUnavailable, match="before the end of its answer"):
            await post(client)


async def test_a_timeout_closes_its_connection() -> None:
    hold = asyncio.Event()
    async with (
        scripted(lambda request, n: OK, hold=hold) as server,
        client_for(server, timeout=0.05) as client,
    ):
        late = r"no answer from 127\.0\.0\.1:\d+ within 0\.05 s"
        with pytest.raises(KubeUnavailable, match=late):
            await post(client)
        hold.set()
        await until(lambda: server.open_now == 0)  # what was left on it is unknown: closed
        assert await post(client) == {}
    assert server.connections == 2


async def test_connections_stay_within_the_limit() -> None:
    hold = asyncio.Event()
    async with (
        scripted(lambda request, n: OK, hold=hold) as server,
        client_for(server, max_connections=3) as client,
    ):
        tasks = [asyncio.ensure_future(post(client)) for _ in range(10)]
        await until(lambda: len(server.requests) == 3)
        for _ in range(50):  # the other seven wait for a connection, none is opened
            await asyncio.sleep(0)
        assert server.connections == 3
        hold.set()
        assert [await t for t in tasks] == [{}] * 10
    assert server.most_open <= 3


# --- the watch's batch pause -------------------------------------------------------------

WATCH_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def rcvlowat(response: aiohttp.ClientResponse) -> int:
    assert response.connection is not None and response.connection.transport is not None
    sock = response.connection.transport.get_extra_info("socket")
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))


async def test_the_batch_pause_leaves_the_socket_unwoken_until_it_ends() -> None:
    """While a watch sleeps between batches, its socket wakes the loop only once a batch's
    bytes wait (SO_RCVLOWAT), not for each event the server sends; cancelled or done, it
    wakes at the first byte again and the transport reads, and what came meanwhile is read."""
    first = WATCH_HEAD + chunk(b'{"type":"BOOKMARK"}\n')
    async with (
        scripted(lambda request, n: first) as server,
        client_for(server) as client,
        client.stream("/w", {}, total=10, what="watch /w") as response,
    ):
        assert await response.content.readany() == b'{"type":"BOOKMARK"}\n'
        assert rcvlowat(response) == 1
        pause = asyncio.create_task(watching.unread(response, 30.0))
        await until(lambda: rcvlowat(response) == watching.BATCH_BYTES)
        transport = response.connection.transport if response.connection else None
        assert transport is not None and not transport.is_reading()
        server.writers[0].write(chunk(b'{"type":"ADDED"}\n'))  # sent during the pause
        pause.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pause
        assert rcvlowat(response) == 1 and transport.is_reading()
        assert await response.content.readany() == b'{"type":"ADDED"}\n'
        await watching.unread(response, 0.0)  # a pause that runs out
        assert rcvlowat(response) == 1 and transport.is_reading()


async def test_a_watch_reads_on_after_its_pauses() -> None:
    """Events sent one by one, each under a batch: every one arrives, in order."""
    events = [b'{"type":"MODIFIED","object":{"n":%d}}\n' % i for i in range(3)]
    answer = WATCH_HEAD + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"
    async with scripted(lambda request, n: answer) as server, client_for(server) as client:
        seen = [e async for e in client.watch("/w", resource_version="1", timeout_seconds=5)]
    assert [e["object"]["n"] for e in seen] == [0, 1, 2]
