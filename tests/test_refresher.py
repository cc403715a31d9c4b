"""extender.refresher: snapshot merging, back-off, node listing and failure counting."""

from __future__ import annotations

import pytest

from extender.config import MetricSettings
from extender.engine import Engine
from extender.metrics import StaticProvider
from extender.model import NodeInfo, NodeInventory, Snapshot
from extender.nodes import NodeCache
from extender.redaction import describe
from extender.refresher import Refresher, next_snapshot
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


async def test_refresher_reads_the_node_cache_and_reports_each_install() -> None:
    settings = make_settings()
    cache = NodeCache()
    seen: list[NodeInventory] = []
    installed: list[int] = []

    class Recording(StaticProvider):
        def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
            seen.append(inventory)
            return super().fetch(metric, inventory)

    engine = Engine(settings, Snapshot.empty(m.name for m in settings.metrics), 0.0)
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

    class Exploding:
        def refreshed(self, snapshot: Snapshot, errors: object, seconds: float) -> None:
            raise RuntimeError("a bug in a listener")

    refresher = Refresher(settings, engine, StaticProvider({"a": {"cpu": 0.1}}), None, Exploding())
    with pytest.raises(RuntimeError):
        await refresher.refresh_once()
    await refresher.refresh_guarded()  # logged, counted, not raised
    assert refresher.failures == 1 and refresher.delay() == 4.0
