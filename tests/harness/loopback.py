"""Loopback networking for tests: the one HTTP test-server helper, the one `free_port`,
and the one way to wait for what a server or process does (`wait_until`).

Every fake server of the suite (tests.harness.kubeapi.FakeKubeAPI, the exporters of
tests.harness.promharness, tests.harness.fakeprom.FakePrometheus) serves its
handler class through `LoopbackServer`:

    with LoopbackServer(Handler, name="fake-thing") as server:
        urllib.request.urlopen(server.url + "/metrics")

It listens on 127.0.0.1 at a port the kernel picks (so two servers never race for one),
answers from daemon threads, and `close()` stops it and waits for its thread.
`free_port()` is for the other case, a port handed to a process we start (or one where
nothing listens).

Tests wait on a condition, bounded by a deadline, never on a fixed sleep:

    wait_until(lambda: api.requests_to("POST", path), 30, "the bind reached the API")
    await wait_until_async(lambda: binder.binding(uid), 30, "the first bind started")

The timeout is a ceiling for a stuck test, not a measurement: pick it generously (a
loaded 2-core CI machine can be many times slower than a laptop), since a condition
that holds early returns at once. On timeout the predicate is checked one last time,
then an AssertionError names what was awaited.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

LOCALHOST = "127.0.0.1"
#: Seconds between two checks of a `wait_until` predicate.
POLL_INTERVAL = 0.02


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago; nothing listens on it now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        port: int = sock.getsockname()[1]
    return port


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away (killed, or cut by a test) is not an error of the
        server: socketserver would print its traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class LoopbackServer:
    """`handler` served on 127.0.0.1 at a kernel-chosen port, from a daemon thread.

    Serving starts in the constructor. Each request runs in its own daemon thread, so a
    handler that stalls (an injected delay) blocks neither other requests nor `close()`.
    """

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        *,
        name: str = "loopback-http",
        poll_interval: float = 0.02,
        port: int = 0,
    ) -> None:
        """`port` 0: one the kernel picks; else that one (a server coming back on the
        port it had, as a restarted API server does)."""
        self._server = _Server((LOCALHOST, port), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._closed = False
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": poll_interval},
            name=name,
            daemon=True,
        )
        self._thread.start()

    @property
    def host(self) -> str:
        return LOCALHOST

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without a trailing slash."""
        return f"http://{LOCALHOST}:{self.port}"

    def close(self) -> None:
        """Stop serving, close the socket and wait for the serving thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _timed_out(what: str, timeout: float, checks: int) -> AssertionError:
    return AssertionError(f"timed out after {timeout} s ({checks} checks) waiting until {what}")


def _polls(predicate: Callable[[], object], timeout: float, what: str) -> Iterator[None]:
    """Checks `predicate` until it holds, yielding between checks (the caller sleeps); the
    last check comes after the deadline, then AssertionError names what was awaited."""
    deadline = time.monotonic() + timeout
    checks = 0
    while True:
        past_deadline = time.monotonic() >= deadline
        checks += 1
        if predicate():
            return
        if past_deadline:
            raise _timed_out(what, timeout, checks)
        yield


def wait_until(
    predicate: Callable[[], object],
    timeout: float,
    what: str = "the condition holds",
    interval: float = POLL_INTERVAL,
) -> bool:
    """Poll `predicate` until it is truthy and return True; AssertionError after `timeout`."""
    for _ in _polls(predicate, timeout, what):
        time.sleep(interval)
    return True


def wait_until_logged(
    predicate: Callable[[], object], timeout: float, what: str, log: Callable[[], str]
) -> bool:
    """`wait_until` for a subprocess: a timeout's AssertionError carries its log."""
    try:
        return wait_until(predicate, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log()}") from None


async def wait_until_async(
    predicate: Callable[[], object],
    timeout: float,
    what: str = "the condition holds",
    interval: float = POLL_INTERVAL,
) -> bool:
    """`wait_until` for a coroutine: sleeps with asyncio, so the event loop keeps running."""
    for _ in _polls(predicate, timeout, what):
        await asyncio.sleep(interval)
    return True


def end_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, wait `timeout`, then SIGKILL: a child never outlives its test."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
