"""The TCP gate relays bytes unchanged; with `segment`, the server's bytes reach the client in
segments of at most that size (what the churn benchmark reads the API server through)."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.harness.gate import TcpGate
from tests.harness.loopback import LOCALHOST


def echo_server() -> tuple[socket.socket, threading.Thread]:
    """One connection: what it reads, sent back in one write."""
    listener = socket.create_server((LOCALHOST, 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while len(data) < 10_000:
                data += conn.recv(65536)
            conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("segment", [None, 1448])
def test_the_gate_relays_every_byte_in_order(segment: int | None) -> None:
    listener, thread = echo_server()
    payload = bytes(range(256)) * 40  # 10,240 bytes
    with listener, TcpGate(listener.getsockname()[1], segment=segment) as gate:
        gate.open()
        with socket.create_connection((LOCALHOST, gate.port), timeout=10) as client:
            client.sendall(payload[:10_000])
            received = b""
            while len(received) < 10_000:
                part = client.recv(65536)
                assert part, "the gate closed early"
                received += part
        thread.join(timeout=10)
    assert received == payload[:10_000]


@pytest.mark.parametrize(("segment", "gap"), [(0, 0.0), (1448, -1.0)])
def test_a_gate_without_segments_or_with_a_negative_gap_is_refused(
    segment: int, gap: float
) -> None:
    with pytest.raises(ValueError):
        TcpGate(1, segment=segment, gap=gap)
