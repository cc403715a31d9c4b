"""A loopback TCP gate in front of a server: connections are refused until `open()`, then
relayed byte for byte to the server (TLS passes through untouched). With `segment`, the
server's bytes reach the client as a network delivers them: in TCP segments of at most
that many bytes (an Ethernet MSS is 1448), `gap` seconds apart, where loopback delivers a
whole write at once (its MTU is 64 KiB) and the reader wakes once for it.

For stories where a client starts before its server answers (a chart rollout, or a
control-plane restart, starts the extender before the API server): point the client at
`gate.port`, start it, `open()` later.

    with TcpGate(target_port) as gate:     # bound, not listening: connect() is refused
        ...start the client on gate.port...
        gate.open()                        # now it reaches the server

The port is bound at once (so nothing else takes it) but listened on only after `open()`:
until then Linux answers a connection attempt with a reset, as for a closed port. Every
relayed connection is shut when the gate closes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

from tests.harness.loopback import LOCALHOST

_CHUNK = 65536
_TICK = 0.2  # seconds between checks of the stop flag while idle


class TcpGate:
    def __init__(
        self,
        target_port: int,
        target_host: str = LOCALHOST,
        *,
        segment: int | None = None,
        gap: float = 0.0,
    ) -> None:
        if segment is not None and segment < 1:
            raise ValueError("segment must be >= 1")
        if gap < 0:
            raise ValueError("gap must be >= 0")
        self._target = (target_host, target_port)
        self._segment = segment
        self._gap = gap
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((LOCALHOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.opened = False
        self.relayed = 0
        """Connections relayed so far."""

    def __enter__(self) -> TcpGate:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Listen and relay from now on."""
        if self.opened:
            return
        self.opened = True
        self._listener.listen(64)
        self._listener.settimeout(_TICK)
        self._spawn(self._accept)

    def close(self) -> None:
        """Stop listening and cut every relayed connection; idempotent."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spawn(self, target: Callable[..., object], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name="tcp-gate", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            if self._segment is not None:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
                self.relayed += 1
            self._spawn(self._pump, client, server)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        """Both directions of one connection, until either side closes."""
        peers = {a: b, b: a}
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([a, b], [], [], _TICK)
                for sock in readable:
                    data = sock.recv(_CHUNK)
                    if not data:
                        return
                    if sock is b and self._segment is not None:
                        self._deliver(a, data, self._segment)
                    else:
                        peers[sock].sendall(data)
        except OSError:
            return
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()

    def _deliver(self, client: socket.socket, data: bytes, segment: int) -> None:
        """`data` to the client a segment at a time (a pacing gap, not a wait on anything)."""
        for at in range(0, len(data), segment):
            if at and self._gap:
                time.sleep(self._gap)
            client.sendall(data[at : at + segment])
