"""extender.refresher: snapshot merging, back-off, node listing and failure counting."""

from __future__ import annotations

import pytest

from extender.config import MetricSettings
from extender.engine import Engine
from extender.metrics import StaticProvider
from extender.model import NodeInfo, NodeInventory, Snapshot
from extender.refresher import Refresher, describe, next_snapshot
from tests.conftest import make_settings


def test_next_snapshot_keeps_last_values_on_error() -> None:
    empty = Snapshot.empty(["cpu", "mem"])
    first = next_snapshot(empty, {"cpu": {"a": 0.1}, "mem": {"a": 0.2}}, 100.0)
    second = next_snapshot(first, {"cpu": TimeoutError("read timed out"), "mem": {"a": 0.3}}, 200.0)
    assert second.metrics["cpu"].values == {"a": 0.1}
    assert second.metrics["cpu"].fetched_at == 100.0
    assert second.metrics["cpu"].error == "TimeoutError: read timed out"
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
    engine = Engine(settings, Snapshot.empty(m.name for m in settings.metrics), clock[0])
    refresher = Refresher(settings, engine, Flaky(4), clock=lambda: clock[0])
    delays = []
    for _ in range(5):
        await refresher.refresh_once()
        delays.append(refresher.delay())
    assert delays == [4.0, 8.0, 10.0, 10.0, 2.0]
    assert engine.snapshot.metrics["cpu"].values == {"a": 0.5}


async def test_refresher_lists_nodes_for_instance_labels_and_survives_api_errors() -> None:
    settings = make_settings(kubernetes={"nodeRefresh": 60})
    calls = []

    def list_nodes() -> list[NodeInfo]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("api down")
        return [NodeInfo("node-a", ("10.0.0.1",), 8.0)]

    clock = [0.0]
    engine = Engine(settings, Snapshot.empty(m.name for m in settings.metrics), 0.0)
    refresher = Refresher(
        settings, engine, StaticProvider({"x": {"cpu": 0.1}}), list_nodes, clock=lambda: clock[0]
    )
    assert await refresher.refresh_once() == {}
    clock[0] = 30.0
    await refresher.refresh_once()
    assert len(calls) == 1  # not before nodeRefresh
    clock[0] = 61.0
    assert await refresher.refresh_once() == {}  # listing failed, metrics still refreshed
    assert len(calls) == 2
    assert engine.snapshot.metrics["cpu"].fetched_at == 61.0


def test_describe_is_one_line_and_redacts_credentials() -> None:
    exc = ConnectionError("401 for Authorization: Bearer s3cr3t\nsecond line")
    assert describe(exc) == "ConnectionError: 401 for Authorization: Bearer <redacted>"


async def test_an_unexpected_failure_counts_and_never_escapes() -> None:
    settings = make_settings(prometheus={"interval": 2, "maxBackoff": 10})
    engine = Engine(settings, Snapshot.empty(["cpu"]), 0.0)

    class Exploding:
        def refreshed(self, snapshot: Snapshot, errors: object, seconds: float) -> None:
            raise RuntimeError("a bug in a listener")

    refresher = Refresher(settings, engine, StaticProvider({"a": {"cpu": 0.1}}), None, Exploding())
    with pytest.raises(RuntimeError):
        await refresher.refresh_once()
    await refresher.refresh_guarded()  # logged, counted, not raised
    assert refresher.failures == 1 and refresher.delay() == 4.0
