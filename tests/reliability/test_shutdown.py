"""Graceful shutdown of the real process: on SIGTERM it stops accepting, finishes the
in-flight bind, and exits 0 within server.gracePeriod."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from tests.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.reliability.conftest import NS, binding_args, extender_args, policy
from tests.reliability.service import LOCALHOST, running_service

UID = "7a1e5b0c-2222-4a4e-9d35-1f0f2e6d0bbb"
GRACE = 5.0
SLOW_BIND = 2.0


def accepting(port: int) -> bool:
    try:
        with socket.create_connection((LOCALHOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def test_sigterm_finishes_the_in_flight_bind_and_exits_0(tmp_path: Path) -> None:
    with FakeKubeAPI(token="t0ken-shutdown") as api:
        api.add_pod(NS, "p1", UID)
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "t0ken-shutdown")
        raw = policy(server={"gracePeriod": GRACE}, bind={"enabled": True, "timeout": 10})
        with running_service(raw, tmp_path, {"KUBECONFIG": str(kubeconfig)}) as svc:
            status, _ = svc.post("/filter", extender_args(UID, "p1", ["node-1"]))
            assert status == 200
            api.delay_next(SLOW_BIND)  # the binding POST is held by the API server
            answer: dict[str, object] = {}

            def bind() -> None:
                status, body = svc.post("/bind", binding_args(UID, "p1", "node-1"), timeout=15)
                answer.update(status=status, body=json.loads(body))

            binder = threading.Thread(target=bind)
            binder.start()
            deadline = time.monotonic() + 5
            while not api.requests_to("POST", f"/api/v1/namespaces/{NS}/pods/p1/binding"):
                assert time.monotonic() < deadline, "the bind never reached the API"
                time.sleep(0.01)
            sent = time.monotonic()
            svc.terminate()
            # it stops accepting new connections while the bind is still running
            while accepting(svc.port):
                assert time.monotonic() - sent < 1.5, "still accepting after SIGTERM"
                time.sleep(0.02)
            stopped_accepting = time.monotonic() - sent
            code = svc.wait(timeout=GRACE + 5)
            exited = time.monotonic() - sent
            binder.join(timeout=10)
            log = svc.stderr()
    assert answer == {"status": 200, "body": {"Error": ""}}, log
    assert api.bind_count(NS, "p1") == 1
    assert stopped_accepting < SLOW_BIND
    assert SLOW_BIND * 0.8 < exited < GRACE, (exited, log)
    assert code == 0, log


def test_sigterm_when_idle_exits_at_once(tmp_path: Path) -> None:
    raw = policy(server={"gracePeriod": GRACE}, bind={"enabled": False})
    with running_service(raw, tmp_path) as svc:
        sent = time.monotonic()
        svc.terminate()
        code = svc.wait(timeout=GRACE + 5)
        assert time.monotonic() - sent < 2
    assert code == 0, svc.stderr()
