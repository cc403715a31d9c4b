"""Live reload in the real process: the policy file changes, SIGHUP, a bad file kept out.

`decice-extender serve` runs as a subprocess on 127.0.0.1; the test rewrites its policy
file the way kubelet updates a mounted ConfigMap (a new file renamed into place) and reads
the outcome from /readyz, /metrics and the verbs. Waits are bounded polls of a condition.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness.loopback import wait_until_logged
from tests.harness.service import Service, running_service

NODES = {"a": {"cpu": 0.1, "mem": 0.9}, "b": {"cpu": 0.9, "mem": 0.1}}
BASE: dict[str, Any] = {
    "provider": "static",
    "static": {"nodes": NODES},
    "bind": {"enabled": False},
    "prometheus": {"interval": 3600},
    "metrics": [{"name": "cpu"}],
}
TWO: dict[str, Any] = {
    **{k: v for k, v in BASE.items() if k != "metrics"},
    "defaultPolicy": "web",
    "policies": {
        "web": {"metrics": [{"name": "cpu"}]},
        "batch": {"metrics": [{"name": "mem"}]},
    },
}


def replace_file(path: Path, doc: dict[str, Any] | str) -> str:
    """Write the policy beside it and rename it into place (atomic, as kubelet does);
    returns the sha256 of the bytes written."""
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    os.replace(fresh, path)
    return hashlib.sha256(text.encode()).hexdigest()


def readyz(svc: Service) -> dict[str, Any]:
    _, body = svc.get("/readyz")
    doc: dict[str, Any] = json.loads(body)
    return doc


def until(what: str, check: Callable[[], bool], svc: Service, within: float = 20.0) -> None:
    wait_until_logged(check, within, what, svc.stderr)


def best(svc: Service, policy: str | None) -> str:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": f"u-{policy}"}
    if policy is not None:
        meta["annotations"] = {"decice.io/policy": policy}
    pod = {"metadata": meta, "spec": {"schedulerName": "decice_sched"}}
    status, body = svc.post("/prioritize", {"Pod": pod, "NodeNames": ["a", "b"]})
    assert status == 200, body
    scores: dict[str, int] = {h["Host"]: h["Score"] for h in json.loads(body)}
    return max(sorted(scores), key=lambda n: scores[n])


def metric(svc: Service, name: str) -> float:
    _, body = svc.get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def test_a_changed_file_a_bad_file_and_sighup(tmp_path: Path) -> None:
    with running_service(BASE, tmp_path) as svc:
        started = readyz(svc)["policy"]
        assert started["sha256"] == hashlib.sha256(svc.config.read_bytes()).hexdigest()
        assert started["policies"] == ["default"]
        assert metric(svc, "decice_config_last_reload_successful") == 1
        assert best(svc, None) == "a"

        # 1. The file changes: two policies, live, no restart.
        sha = replace_file(svc.config, TWO)
        until("the new policy is in force", lambda: readyz(svc)["policy"]["sha256"] == sha, svc)
        assert readyz(svc)["policy"]["policies"] == ["web", "batch"]
        assert best(svc, None) == "a" and best(svc, "batch") == "b"
        loaded = metric(svc, "decice_config_last_reload_success_timestamp_seconds")

        # 2. A bad file: the old policies keep serving, the failure is shown, still ready.
        replace_file(svc.config, {**TWO, "defaultPolicy": "gpu"})
        until(
            "the failed reload is reported",
            lambda: not readyz(svc)["policy"]["lastReload"]["successful"],
            svc,
        )
        status, _ = svc.get("/readyz")
        doc = readyz(svc)["policy"]
        assert status == 200 and doc["sha256"] == sha
        assert any("defaultPolicy" in p for p in doc["lastReload"]["problems"])
        assert metric(svc, "decice_config_last_reload_successful") == 0
        assert metric(svc, "decice_config_last_reload_success_timestamp_seconds") == loaded
        assert best(svc, "batch") == "b"
        assert "policy reload (file changed)" in svc.stderr()

        # 3. SIGHUP reads the file again (here, after a fix written with the watch's
        # event possibly still pending: either trigger must end in the same state).
        fixed = replace_file(svc.config, {**TWO, "defaultPolicy": "batch"})
        os.kill(svc.pid, signal.SIGHUP)
        until("SIGHUP reloads", lambda: readyz(svc)["policy"]["sha256"] == fixed, svc)
        assert readyz(svc)["policy"]["defaultPolicy"] == "batch"
        assert best(svc, None) == "b"
        assert metric(svc, "decice_config_last_reload_successful") == 1
        assert svc.alive()
    assert "Traceback" not in svc.stderr()


def test_sighup_alone_reloads_an_edited_file(tmp_path: Path) -> None:
    with running_service(BASE, tmp_path) as svc:
        until("the file watch runs", lambda: readyz(svc)["policy"]["watching"], svc)
        os.kill(svc.pid, signal.SIGHUP)  # unchanged bytes: a no-op, not a failure
        time_before = readyz(svc)["policy"]["loadedAt"]
        sha = replace_file(svc.config, TWO)
        os.kill(svc.pid, signal.SIGHUP)
        until("reloaded", lambda: readyz(svc)["policy"]["sha256"] == sha, svc)
        assert readyz(svc)["policy"]["loadedAt"] >= time_before
        assert svc.alive()
