"""extender.policy.reload: live reload of the policy file (validated first, old policy kept on any
problem), from a watch of its directory (the ConfigMap symlink swap) and from SIGHUP.

Waits are on conditions with a bounded timeout, never a sleep of a guessed length."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from extender.errors.backoff import Backoff
from extender.policy import filewatch
from extender.policy.loading import read_policy
from extender.policy.reload import PolicyReloader, restart_sections
from extender.policy.settings import Settings
from extender.service.telemetry import Telemetry

BOUND = 10.0
"""Seconds any wait may take before the test fails (a watch reacts within about 1 s)."""

STATIC: dict[str, Any] = {
    "provider": "static",
    "static": {"nodes": {"n1": {"cpu": 0.5}}},
    "bind": {"enabled": False},
}
V1: dict[str, Any] = {**STATIC, "metrics": [{"name": "cpu"}]}
V2: dict[str, Any] = {
    **STATIC,
    "policies": {
        "a": {"metrics": [{"name": "cpu"}]},
        "b": {"metrics": [{"name": "cpu", "weight": 2.0}]},
    },
    "defaultPolicy": "a",
}
V3: dict[str, Any] = {**STATIC, "metrics": [{"name": "cpu", "direction": "higher"}]}


def text(policy: dict[str, Any]) -> str:
    return yaml.safe_dump(policy, sort_keys=False)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Applied:
    """The apply callback: records each Settings; waits are on an Event, not a sleep."""

    def __init__(self) -> None:
        self.calls: list[Settings] = []
        self.trace: list[str] = []
        self.gate: asyncio.Event | None = None  # set: apply blocks until it is set
        self.entered = asyncio.Event()
        self.error: Exception | None = None
        self._changed = asyncio.Event()

    async def __call__(self, settings: Settings) -> None:
        self.trace.append("enter")
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        self.trace.append("exit")
        if self.error is not None:
            raise self.error
        self.calls.append(settings)
        self._changed.set()

    async def wait(self, count: int) -> None:
        async def reached() -> None:
            while len(self.calls) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(reached(), BOUND)


def metrics(t: Telemetry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(t.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def successful(t: Telemetry) -> float:
    return metrics(t)[("decice_config_last_reload_successful", ())]


def success_at(t: Telemetry) -> float:
    return metrics(t)[("decice_config_last_reload_success_timestamp_seconds", ())]


def info(t: Telemetry) -> list[str]:
    return [dict(labels)["sha256"] for name, labels in metrics(t) if name == "decice_config_info"]


class Rig:
    def __init__(self, path: Path, environ: dict[str, str] | None = None) -> None:
        self.path = path
        self.clock = Clock()
        self.applied = Applied()
        self.telemetry = Telemetry()
        settings, sha = read_policy(path, environ or {})
        self.reloader = PolicyReloader(path, environ or {}, settings, sha, self.applied, self.clock)
        self.telemetry.watch_config(self.reloader.figures)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    path = tmp_path / "policy.yaml"
    path.write_text(text(V1))
    return Rig(path)


async def until(condition: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), BOUND)


# --- reload() ---------------------------------------------------------------------------------


async def test_start_state_is_reported(rig: Rig) -> None:
    r = rig.reloader
    assert successful(rig.telemetry) == 1
    assert success_at(rig.telemetry) == 1000.0
    assert info(rig.telemetry) == [r.sha256[:12]]
    detail = r.detail()
    assert detail["sha256"] == r.sha256 and len(r.sha256) == 64
    assert detail["lastReload"] == {
        "at": 1000.0,
        "successful": True,
        "reason": "start",
        "error": None,
        "problems": [],
    }


async def test_changed_valid_file_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text(V1))
    rig = Rig(path, {"PROMETHEUS_URL": "http://prom.example:9090"})
    r = rig.reloader
    old = r.sha256
    path.write_text(text(V2))
    rig.clock.now = 2000.0

    assert await r.reload("test") is True

    (new,) = rig.applied.calls
    assert list(new.policy_map) == ["a", "b"] and new.default.name == "a"
    # The start's environment overrides apply on reload too.
    assert new.prometheus.url == "http://prom.example:9090"
    assert r.settings is new and r.sha256 != old
    assert successful(rig.telemetry) == 1
    assert success_at(rig.telemetry) == 2000.0
    assert info(rig.telemetry) == [r.sha256[:12]]
    detail = r.detail()
    assert detail["sha256"] == r.sha256
    assert detail["loadedAt"] == 2000.0
    assert detail["lastReload"] == {
        "at": 2000.0,
        "successful": True,
        "reason": "test",
        "error": None,
        "problems": [],
    }


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"metrics: [\n", "not valid YAML"),
        (text({**V1, "metricz": []}).encode(), "metricz: unknown key"),
        (text({**V1, "metrics": [{"name": "cpu", "min": 1, "max": 0}]}).encode(), "max (0)"),
        (b"\xff\xfe metrics", "not UTF-8"),
        (None, "No such file or directory"),
    ],
    ids=["yaml", "unknown-key", "schema", "not-utf8", "missing"],
)
async def test_bad_file_keeps_the_old_policy(
    rig: Rig, caplog: pytest.LogCaptureFixture, content: bytes | None, problem: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="decice.reload")
    r = rig.reloader
    before = (r.settings, r.sha256)
    if content is None:
        rig.path.unlink()
    else:
        rig.path.write_bytes(content)
    rig.clock.now = 2000.0

    assert await r.reload("test") is False

    assert rig.applied.trace == []
    assert (r.settings, r.sha256) == before
    assert successful(rig.telemetry) == 0
    assert success_at(rig.telemetry) == 1000.0  # the last *successful* load
    assert info(rig.telemetry) == [r.sha256[:12]]
    last = r.detail()["lastReload"]
    assert isinstance(last, dict)
    assert last["successful"] is False and last["at"] == 2000.0 and last["reason"] == "test"
    assert last["error"]
    assert any(problem in p for p in last["problems"]), last
    assert r.detail()["sha256"] == r.sha256
    errors = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert problem in message and "(test)" in message and "\n" not in message

    # Fixing the file recovers: the metric goes back to 1.
    rig.path.write_text(text(V2))
    assert await r.reload("fixed") is True
    assert successful(rig.telemetry) == 1 and success_at(rig.telemetry) == 2000.0


async def test_putting_back_the_policy_in_force_clears_the_failure(rig: Rig) -> None:
    good = rig.path.read_bytes()
    rig.path.write_text("metrics: []\n")
    assert await rig.reloader.reload("file changed") is False
    assert successful(rig.telemetry) == 0
    rig.path.write_bytes(good)  # the operator reverts the ConfigMap
    rig.clock.now = 3000.0
    assert await rig.reloader.reload("file changed") is True
    assert rig.applied.trace == []  # nothing to apply: it is the policy in force
    assert successful(rig.telemetry) == 1 and success_at(rig.telemetry) == 1000.0
    last = rig.reloader.detail()["lastReload"]
    assert isinstance(last, dict) and last["successful"] is True and last["at"] == 3000.0


async def test_same_bytes_do_nothing(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="decice.reload")
    rig.clock.now = 2000.0
    assert await rig.reloader.reload("file changed") is True
    assert rig.applied.trace == []
    assert rig.reloader.detail()["lastReload"] == {
        "at": 1000.0,
        "successful": True,
        "reason": "start",
        "error": None,
        "problems": [],
    }
    assert [rec.levelno for rec in caplog.records] == [logging.DEBUG]


async def test_restart_only_sections_are_warned_and_policies_applied(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="decice.reload")
    changed = {**V2, "server": {"port": 9999}, "bind": {"enabled": False, "timeout": 1.0}}
    rig.path.write_text(text(changed))

    assert await rig.reloader.reload("test") is True

    assert len(rig.applied.calls) == 1
    warnings = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(warnings) == 1 and "changed but need a restart: server, bind" in warnings[0]
    infos = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.INFO]
    sha = rig.reloader.sha256[:12]
    assert infos == [f"policy reloaded (test): sha256 {sha}, policies a, b (default a)"]


async def test_restart_sections_compare_with_the_start() -> None:
    start = Settings.model_validate({**V1}, by_alias=True)
    same_but_policies = Settings.model_validate({**V2}, by_alias=True)
    assert restart_sections(start, same_but_policies) == []
    moved = Settings.model_validate({**V1, "schedulerNames": ["other"]}, by_alias=True)
    assert restart_sections(start, moved) == ["schedulerNames"]


async def test_failing_apply_keeps_the_old_state(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="decice.reload")
    r = rig.reloader
    before = (r.settings, r.sha256)
    rig.applied.error = RuntimeError("table build failed: metric 'cpu' unknown")
    rig.path.write_text(text(V2))

    assert await r.reload("test") is False

    assert rig.applied.trace == ["enter", "exit"] and rig.applied.calls == []
    assert (r.settings, r.sha256) == before
    assert successful(rig.telemetry) == 0 and success_at(rig.telemetry) == 1000.0
    last = r.detail()["lastReload"]
    assert isinstance(last, dict)
    assert last["successful"] is False
    assert any("table build failed" in p for p in last["problems"])
    (error,) = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert "table build failed" in error

    # The same bytes are tried again on the next trigger (the failure did not adopt them).
    rig.applied.error = None
    assert await r.reload("again") is True
    assert len(rig.applied.calls) == 1


async def test_concurrent_reloads_are_serialized(rig: Rig) -> None:
    r = rig.reloader
    rig.applied.gate = asyncio.Event()
    rig.path.write_text(text(V2))
    first = asyncio.create_task(r.reload("one"))
    second = asyncio.create_task(r.reload("two"))
    await asyncio.wait_for(rig.applied.entered.wait(), BOUND)
    assert not second.done()
    rig.applied.gate.set()

    assert list(await asyncio.wait_for(asyncio.gather(first, second), BOUND)) == [True, True]
    # The second waited for the first and then saw the file already in force.
    assert rig.applied.trace == ["enter", "exit"]

    rig.applied.gate = asyncio.Event()
    rig.applied.entered.clear()
    rig.path.write_text(text(V3))
    third = asyncio.create_task(r.reload("three"))
    await asyncio.wait_for(rig.applied.entered.wait(), BOUND)
    rig.path.write_text(text(V1))
    fourth = asyncio.create_task(r.reload("four"))
    rig.applied.gate.set()
    assert list(await asyncio.wait_for(asyncio.gather(third, fourth), BOUND)) == [True, True]
    assert rig.applied.trace == ["enter", "exit"] * 3  # never two applies at once
    assert [s.default.metrics[0].direction for s in rig.applied.calls] == [
        "lower",
        "higher",
        "lower",
    ]
    assert r.detail()["lastReload"] == {
        "at": 1000.0,
        "successful": True,
        "reason": "four",
        "error": None,
        "problems": [],
    }


# --- triggers ---------------------------------------------------------------------------------


def configmap(root: Path, content: str) -> Path:
    """The layout kubelet's atomic writer makes for a ConfigMap volume."""
    root.mkdir()
    first = root / "..2026_11_24_00_00_00.1"
    first.mkdir()
    (first / "policy.yaml").write_text(content)
    os.symlink(first.name, root / "..data")
    os.symlink("..data/policy.yaml", root / "policy.yaml")
    return root / "policy.yaml"


def atomic_update(root: Path, content: str, stamp: str) -> None:
    """What kubelet does on a ConfigMap change: a new timestamped directory, a temporary
    symlink to it renamed onto `..data`, the old directory removed."""
    old = os.readlink(root / "..data")
    new = root / f"..{stamp}"
    new.mkdir()
    (new / "policy.yaml").write_text(content)
    os.symlink(new.name, root / "..data_tmp")
    os.replace(root / "..data_tmp", root / "..data")
    shutil.rmtree(root / old)


@pytest.mark.parametrize("force_polling", [False, True], ids=["notify", "polling"])
async def test_configmap_symlink_swap_reloads(tmp_path: Path, force_polling: bool) -> None:
    path = configmap(tmp_path / "policy", text(V1))
    rig = Rig(path)
    r = rig.reloader
    watcher = asyncio.create_task(r.triggers.watch(debounce_ms=100, force_polling=force_polling))
    try:
        await asyncio.wait_for(r.triggers.watching.wait(), BOUND)
        assert rig.applied.calls == []  # the start's file: nothing to do
        atomic_update(path.parent, text(V2), "2026_11_24_00_05_00.2")
        await rig.applied.wait(1)
        assert list(rig.applied.calls[0].policy_map) == ["a", "b"]
        assert r.detail()["lastReload"]["reason"] == "file changed"  # type: ignore[index]

        atomic_update(path.parent, text(V3), "2026_11_24_00_10_00.3")
        await rig.applied.wait(2)
        assert rig.applied.calls[1].default.metrics[0].direction == "higher"
        assert r.detail()["watching"] is True
    finally:
        watcher.cancel()
        # Cancellation stops the watch promptly (not after the watcher thread's wake-up).
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(watcher, 0.9)
    assert not r.triggers.watching.is_set()


async def test_watch_survives_a_missing_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="decice.reload")
    monkeypatch.setattr(filewatch, "_RETRY", Backoff(base=0.05, cap=30.0))
    path = configmap(tmp_path / "policy", text(V1))
    rig = Rig(path)
    r = rig.reloader
    shutil.rmtree(path.parent)
    watcher = asyncio.create_task(r.triggers.watch(debounce_ms=100))
    try:
        await until(lambda: any("cannot watch" in rec.getMessage() for rec in caplog.records))
        assert not watcher.done()
        # The volume comes back with another policy: the restarted watch catches up.
        configmap(path.parent, text(V2))
        await rig.applied.wait(1)
        await asyncio.wait_for(r.triggers.watching.wait(), BOUND)
        assert r.detail()["lastReload"]["reason"] == "watch started"  # type: ignore[index]
    finally:
        watcher.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(watcher, BOUND)


async def test_watch_follows_a_removed_and_recreated_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="decice.reload")
    monkeypatch.setattr(filewatch, "_RETRY", Backoff(base=0.05, cap=30.0))
    path = configmap(tmp_path / "policy", text(V1))
    rig = Rig(path)
    r = rig.reloader
    watcher = asyncio.create_task(r.triggers.watch(debounce_ms=100))
    try:
        await asyncio.wait_for(r.triggers.watching.wait(), BOUND)
        shutil.rmtree(path.parent)
        await until(lambda: any("was removed" in rec.getMessage() for rec in caplog.records))
        configmap(path.parent, text(V2))
        await rig.applied.wait(1)
        assert list(rig.applied.calls[0].policy_map) == ["a", "b"]
    finally:
        watcher.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(watcher, BOUND)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
async def test_sighup_reloads(rig: Rig) -> None:
    r = rig.reloader
    assert r.triggers.install_sighup() is True
    try:
        rig.path.write_text(text(V2))
        os.kill(os.getpid(), signal.SIGHUP)
        await rig.applied.wait(1)
        assert r.detail()["lastReload"]["reason"] == "SIGHUP"  # type: ignore[index]
    finally:
        r.triggers.remove_sighup()
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
