"""extender.metrics.refresher: snapshot merging, back-off, node listing and failure counting."""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import threading
from typing import Any

import pytest

from extender.decisions.engine import Engine
from extender.decisions.model import NodeInfo, NodeInventory, Snapshot
from extender.decisions.nodes import NodeCache
from extender.decisions.state import build_tables
from extender.errors.causes import describe
from extender.metrics.providers import StaticProvider
from extender.metrics.refresher import Refresher, next_snapshot
from extender.policy.policies import MetricSettings
from tests.harness.fixtures import make_settings


def test_next_snapshot_keeps_last_values_on_error() -> None:
    empty = Snapshot.empty(["cpu", "mem"])
    first = next_snapshot(empty, {"cpu": {"a": 0.1}, "mem": {"a": 0.2}}, 100.0)
    second = next_snapshot(first, {"cpu": TimeoutError("read timed out"), "mem": {"a": 0.3}}, 200.0)
    assert second.metrics["cpu"].values == {"a": 0.1}
    assert second.metrics["cpu"].fetched_at == 100.0
    assert second.metrics["cpu"].error == "timeout (read timed out)"
    assert second.metrics["mem"].values == {"a": 0.3} and second.metrics["mem"].fetched_at == 200.0
    assert second.generation == first.generation + 1


class Flaky:
    """Fails `failures` times, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("connection refused")
        return {"a": 0.5}


async def test_refresher_backs_off_and_recovers() -> None:
    settings = make_settings(prometheus={"interval": 2, "maxBackoff": 10})
    clock = [1000.0]
    engine = Engine(settings, Snapshot.empty(m.name for m in settings.fetched_metrics), clock[0])
    refresher = Refresher(settings, engine, Flaky(4), clock=lambda: clock[0])
    refresher.rng = random.Random(2)
    delays = []
    for _ in range(5):
        await refresher.refresh_once()
        delays.append(refresher.delay())
    # After failures: drawn between one interval and a ceiling of 4, 8, 10 (maxBackoff) s.
    ceilings = [4.0, 8.0, 10.0, 10.0]
    assert all(2.0 <= d <= c for d, c in zip(delays, ceilings, strict=False)), delays
    assert len(set(delays[:4])) == 4  # jittered, not in lockstep
    assert delays[4] == 2.0  # recovered: the interval again
    assert engine.snapshot.metrics["cpu"].values == {"a": 0.5}


async def test_refresher_reads_the_node_cache_and_reports_each_install() -> None:
    settings = make_settings()
    cache = NodeCache()
    seen: list[NodeInventory] = []
    installed: list[int] = []

    class Recording(StaticProvider):
        def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
            seen.append(inventory)
            return super().fetch(metric, inventory)

    engine = Engine(settings, Snapshot.empty(m.name for m in settings.fetched_metrics), 0.0)
    refresher = Refresher(
        settings,
        engine,
        Recording({"node-a": {"cpu": 0.1}}),
        cache.inventory,
        clock=lambda: 10.0,
        installed=lambda snapshot: installed.append(snapshot.generation),
    )
    await refresher.refresh_once()
    cache.replace([NodeInfo("node-a", ("10.0.0.1",), 8.0)])
    await refresher.refresh_once()
    assert [s.by_ip for s in seen] == [{}, {"10.0.0.1": "node-a"}]
    assert installed == [1, 2]
    assert engine.herd() == {}  # node cores known now: a reservation is counted against 8
    engine.reserve("u", "node-a", 2.0, 10.0)
    assert engine.herd() == {"node-a": 0.25}


def test_describe_is_one_line_and_redacts_credentials() -> None:
    exc = ConnectionError("401 for Authorization: Bearer s3cr3t\nsecond line")
    assert describe(exc) == "ConnectionError: 401 for Authorization: Bearer <redacted>"


async def test_an_unexpected_failure_counts_and_never_escapes() -> None:
    settings = make_settings(prometheus={"interval": 2, "maxBackoff": 10})
    engine = Engine(settings, Snapshot.empty(["cpu"]), 0.0)

    def exploding(snapshot: Snapshot, errors: object, seconds: float) -> None:
        raise RuntimeError("a bug in a listener")

    refresher = Refresher(settings, engine, StaticProvider({"a": {"cpu": 0.1}}), None, exploding)
    with pytest.raises(RuntimeError):
        await refresher.refresh_once()
    await refresher.refresh_guarded()  # logged, counted, not raised
    assert refresher.failures == 1 and 2.0 <= refresher.delay() <= 4.0


class Scripted:
    """Per metric: one step per call (values, or an exception to raise); the last repeats."""

    def __init__(self, **steps: list[dict[str, float] | BaseException]) -> None:
        self.steps = steps
        self.calls: dict[str, int] = {}

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        steps = self.steps[metric.name]
        n = self.calls[metric.name] = self.calls.get(metric.name, 0) + 1
        step = steps[min(n, len(steps)) - 1]
        if isinstance(step, BaseException):
            raise step
        return step


def logged(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[tuple[str, str]]:
    return [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name == "decice.refresher" and r.levelno >= level
    ]


PROMETHEUS = {"url": "http://prometheus:9090", "interval": 2, "maxBackoff": 10}


async def test_a_failure_streak_is_logged_at_its_start_its_changes_every_tenth_and_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(
        provider="prometheus", prometheus=PROMETHEUS, metrics=[{"name": "cpu", "query": "up"}]
    )
    refused = ConnectionRefusedError(111, "Connection refused")
    slow = TimeoutError("timed out")
    script: list[dict[str, float] | BaseException] = [{"a": 0.5}, refused, refused, refused]
    script += [slow] * 12 + [{"a": 0.6}]
    clock = [1000.0]
    engine = Engine(settings, Snapshot.empty(["cpu"]), clock[0])
    refresher = Refresher(settings, engine, Scripted(cpu=script), clock=lambda: clock[0])
    caplog.set_level(logging.DEBUG, logger="decice.refresher")
    for _ in range(len(script) + 2):  # two more good refreshes: nothing more to say
        await refresher.refresh_once()
        clock[0] += 3.0
    assert logged(caplog) == [
        ("WARNING", "metric cpu: refresh failed (keeping the last values): connection refused"),
        ("WARNING", "metric cpu: refresh still failing (4 failed refreshes), now: timeout"),
        ("WARNING", "metric cpu: refresh still failing (14 failed refreshes in 39 s): timeout"),
        ("INFO", "metric cpu: Prometheus answered again after 15 failed refreshes (45 s)"),
    ]
    debug = [m for level, m in logged(caplog, logging.DEBUG) if level == "DEBUG"]
    assert len(debug) == 2 + 9 + 1  # each other failure, at debug


async def test_metrics_failing_alike_share_a_line(caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(
        provider="prometheus",
        prometheus=PROMETHEUS,
        metrics=[{"name": "cpu", "query": "a"}, {"name": "mem", "query": "b"}],
    )
    down = ConnectionRefusedError(111, "Connection refused")
    provider = Scripted(cpu=[down, down, {"a": 0.1}], mem=[down, down, {"a": 0.2}])
    clock = [0.0]
    engine = Engine(settings, Snapshot.empty(["cpu", "mem"]), 0.0)
    refresher = Refresher(settings, engine, provider, clock=lambda: clock[0])
    with caplog.at_level(logging.INFO, logger="decice.refresher"):
        for _ in range(3):
            await refresher.refresh_once()
            clock[0] += 20.0
    assert logged(caplog) == [
        (
            "WARNING",
            "metrics cpu, mem: refresh failed (keeping the last values): connection refused",
        ),
        ("INFO", "metrics cpu, mem: Prometheus answered again after 2 failed refreshes (40 s)"),
    ]


class Gated:
    """Answers once `gate` opens, so a test can act while a refresh is in flight."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return {"a": 0.5}


async def test_a_refresh_overtaken_by_a_reload_is_dropped() -> None:
    old = make_settings()
    new = make_settings(metrics=[{"name": "cpu", "weight": 3}])
    engine = Engine(old, Snapshot.empty(["cpu"]), 100.0)
    provider = Gated()
    refresher = Refresher(old, engine, provider, clock=lambda: 100.0)
    slow = asyncio.create_task(refresher.refresh_once())
    assert await asyncio.to_thread(provider.entered.wait, 10)
    # A reload installs other policies while the old refresh is still fetching.
    engine.install(engine.snapshot, None, 100.0, new)
    provider.gate.set()
    assert await slow == {}
    assert engine.settings is new  # the old refresh did not put its policies back
    assert engine.snapshot.generation == 0  # nor its snapshot
    assert await refresher.refresh_once() == {}
    assert engine.settings is new and engine.snapshot.generation == 1


async def test_the_tables_are_built_with_the_shorter_switch_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a refresh builds its tables in a thread, a request waits at most
    BUILD_SWITCH_INTERVAL for the interpreter; before and after, Python's own."""
    import extender.metrics.refresher as refresher_module

    settings = make_settings()
    engine = Engine(settings, Snapshot.empty(m.name for m in settings.fetched_metrics), 0.0)
    seen: list[float] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(sys.getswitchinterval())
        return build_tables(*args, **kwargs)

    monkeypatch.setattr(refresher_module, "build_tables", recording)
    before = sys.getswitchinterval()
    await Refresher(settings, engine, StaticProvider({"a": {"cpu": 0.5}})).refresh_once()
    assert seen == [refresher_module.BUILD_SWITCH_INTERVAL] and seen[0] != before
    assert sys.getswitchinterval() == before


def test_overlapping_blocks_restore_the_interval_from_before_the_first() -> None:
    from extender.metrics.refresher import _SwitchInterval

    switch, before = _SwitchInterval(), sys.getswitchinterval()
    outer = switch.set_to(0.001)
    inner = switch.set_to(0.0002)
    outer.__enter__()
    inner.__enter__()  # the interval is the first block's: a second build changes nothing
    assert sys.getswitchinterval() == pytest.approx(0.001)
    outer.__exit__(None, None, None)  # the first ends before the second
    assert sys.getswitchinterval() == pytest.approx(0.001)
    inner.__exit__(None, None, None)
    assert sys.getswitchinterval() == before
    with switch.set_to(None):
        assert sys.getswitchinterval() == before
