"""Graceful shutdown of the real process: on SIGTERM it stops accepting, finishes the
in-flight bind, and exits 0 within server.gracePeriod.

Nothing here is measured with a clock. The API server holds the in-flight bind until the
test releases it, so "it stopped accepting before the bind finished" and "it waited for
the bind" are observed while the bind is provably still running. The grace period is far
longer than any step of the tests: a process that waited for it instead of exiting when
its work was done fails them, a slow machine does not.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path

from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import LOCALHOST, wait_until
from tests.harness.service import Service, running_service
from tests.harness.stack import NS, binding_args, extender_args, policy

UID = "7a1e5b0c-2222-4a4e-9d35-1f0f2e6d0bbb"
BINDING = f"/api/v1/namespaces/{NS}/pods/p1/binding"
#: server.gracePeriod: exiting within half of it means the process did not wait for it.
GRACE = 30.0
#: How long the process must stay up, after it stopped accepting, while its bind is held.
HOLD = 1.0


def accepting(port: int) -> bool:
    try:
        with socket.create_connection((LOCALHOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def still_running(svc: Service, after: float) -> bool:
    """True if the process is still up `after` s from now."""
    try:
        svc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        return True
    return False


def exit_code(svc: Service, within: float, what: str) -> int:
    """The exit code, once the process exits; AssertionError if it is still up `within` s."""
    try:
        return svc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {within} s: {what}\n{svc.stderr()}") from None


def test_sigterm_finishes_the_in_flight_bind_and_exits_0(tmp_path: Path) -> None:
    with FakeKubeAPI(token="t0ken-shutdown") as api:
        api.add_pod(NS, "p1", UID)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "t0ken-shutdown")
        raw = policy(server={"gracePeriod": GRACE}, bind={"enabled": True, "timeout": 2 * GRACE})
        with running_service(raw, tmp_path, {"KUBECONFIG": str(kubeconfig)}) as svc:
            status, _ = svc.post("/filter", extender_args(UID, "p1", ["node-1"]))
            assert status == 200
            api.delay_next(2 * GRACE)  # the API server holds the binding POST until released
            answer: dict[str, object] = {}

            def bind() -> None:
                status, body = svc.post(
                    "/bind", binding_args(UID, "p1", "node-1"), timeout=4 * GRACE
                )
                answer.update(status=status, body=json.loads(body))

            binder = threading.Thread(target=bind)
            binder.start()
            wait_until(lambda: api.requests_to("POST", BINDING), 30, "the bind reached the API")
            svc.terminate()
            # it stops accepting new connections while the bind is still held
            wait_until(lambda: not accepting(svc.port), 30, "the service stops accepting")
            assert not answer and binder.is_alive(), "the held bind was answered"
            # and stays up for the held bind instead of exiting
            assert still_running(svc, HOLD), f"exited with its bind in flight:\n{svc.stderr()}"
            assert not answer, "the held bind was answered"
            api.release_delays()
            # once the bind is done it exits, long before the grace period ends
            code = exit_code(svc, GRACE / 2, "the bind is done, the grace period is not")
            binder.join(timeout=30)
            log = svc.stderr()
    assert answer == {"status": 200, "body": {"Error": ""}}, log
    assert api.bind_count(NS, "p1") == 1
    assert code == 0, log


def test_sigterm_when_idle_exits_at_once(tmp_path: Path) -> None:
    raw = policy(server={"gracePeriod": GRACE}, bind={"enabled": False})
    with running_service(raw, tmp_path) as svc:
        svc.terminate()
        # nothing in flight: it exits without waiting for the grace period
        code = exit_code(svc, GRACE / 2, "idle, it has nothing to wait for")
    assert code == 0, svc.stderr()
