"""extender.cluster.client.linestream: the watch answer as bytes arrive, split anywhere:
the head, the chunked body, lines across chunks, the sieve in the callback, an error
answer's body, a stream cut short, a line too long. (The loopback and real API servers'
streams are read through it in tests/cluster/test_client.py and the e2e suite.)"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from extender.cluster.client.errors import KubeError, KubeUnavailable
from extender.cluster.client.linestream import BATCH_BYTES, END, WatchProtocol
from tests.harness.loopback import wait_until_async


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False
        self.paused = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def event(i: int, kind: str = "MODIFIED") -> dict[str, Any]:
    return {"type": kind, "object": {"metadata": {"name": f"p{i}", "resourceVersion": str(i)}}}


def chunked(lines: list[bytes], sizes: list[int]) -> bytes:
    """The lines as a chunked body, cut into chunks of the given sizes (cycled)."""
    body = b"".join(lines)
    out, pos, i = b"", 0, 0
    while pos < len(body):
        size = sizes[i % len(sizes)]
        piece = body[pos : pos + size]
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        pos += size
        i += 1
    return out + b"0\r\n\r\n"


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def feed(protocol: WatchProtocol, data: bytes, rng: random.Random) -> None:
    """The bytes in reads of random sizes, as a socket delivers them."""
    pos = 0
    while pos < len(data):
        n = rng.randint(1, 700)
        piece = data[pos : pos + n]
        protocol.get_buffer(-1)[: len(piece)] = piece
        protocol.buffer_updated(len(piece))
        pos += n


async def test_events_split_anywhere_arrive_whole_and_in_order() -> None:
    events = [event(i) for i in range(40)]
    lines = [orjson.dumps(e) + b"\n" for e in events]
    for seed in range(20):
        rng = random.Random(seed)
        protocol = WatchProtocol("watch /api/v1/pods", 1 << 20, None)
        protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
        feed(protocol, HEAD + chunked(lines, [rng.randint(1, 300), 97, 1]), rng)
        assert protocol.status == 200 and protocol.head_ready.done()
        got = list(protocol.items)
        assert got[:-1] == events and got[-1] is END, seed


async def test_the_sieve_runs_on_each_line_and_only_kept_lines_are_decoded() -> None:
    lines = [orjson.dumps(event(i)) + b"\n" for i in range(10)]
    seen: list[bytes] = []

    def sieve(line: bytearray) -> bool:
        seen.append(bytes(line))
        return b'"p3"' in line

    protocol = WatchProtocol("watch", 1 << 20, sieve)
    protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(protocol, HEAD + chunked(lines, [50]), random.Random(1))
    assert seen == [line[:-1] for line in lines]
    assert list(protocol.items) == [event(3), END]


async def test_an_error_answer_keeps_its_body() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    body = orjson.dumps(status)
    head = b"HTTP/1.1 410 Gone\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    protocol = WatchProtocol("watch", 1 << 20, None)
    protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(protocol, head + body, random.Random(2))
    assert (protocol.status, protocol.reason) == (410, "Gone")
    assert orjson.loads(protocol.error_body) == status
    assert list(protocol.items) == [END]


async def test_a_stream_cut_short_and_a_line_too_long_are_errors() -> None:
    protocol = WatchProtocol("watch", 1 << 20, None)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    feed(protocol, HEAD + b'10\r\n{"type":"ADDED', random.Random(3))
    protocol.connection_lost(None)
    [item] = protocol.items
    assert isinstance(item, KubeUnavailable) and "the watch stream broke" in str(item)

    protocol = WatchProtocol("watch", 100, None)
    protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(protocol, HEAD + chunked([b"x" * 500], [64]), random.Random(4))
    [item] = protocol.items
    assert isinstance(item, KubeError) and "longer than 100 bytes" in str(item)


async def test_bad_framing_is_named() -> None:
    protocol = WatchProtocol("watch", 1 << 20, None)
    protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(protocol, HEAD + b"zz\r\n", random.Random(5))
    [item] = protocol.items
    assert isinstance(item, KubeError) and "bad chunk size" in str(item)
    with pytest.raises(KubeError):
        raise item


async def test_a_small_delivery_pauses_reading_for_a_batch_and_a_big_one_does_not() -> None:
    protocol = WatchProtocol("watch", 1 << 20, None)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    feed(protocol, HEAD + b"10\r\n", random.Random(6))
    assert transport.paused  # the next events wait in the socket, taken as one batch
    await wait_until_async(lambda: not transport.paused, 5, "reading resumed after the batch")
    big = orjson.dumps(event(1)) + b"\n"
    data = f"{len(big) * 40:x}\r\n".encode() + big * 40 + b"\r\n"
    data = data * (BATCH_BYTES // len(data) + 1)
    protocol.get_buffer(-1)[: len(data)] = data
    protocol.buffer_updated(len(data))
    assert not transport.paused  # a stream this busy is read at once
