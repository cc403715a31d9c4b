"""Series -> node mapping, snapshot merging and the refresher's back-off (no network)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.config import MetricSettings
from extender.engine import Engine
from extender.metrics import (
    Refresher,
    StaticProvider,
    empty_snapshot,
    map_series,
    next_snapshot,
    node_of,
)
from extender.model import NodeInfo, NodeInventory
from tests.conftest import make_settings

INVENTORY = NodeInventory.from_nodes(
    [NodeInfo("node-a", ("10.0.0.1",), 4.0), NodeInfo("node-b", ("10.0.0.2", "fd00::2"), None)]
)


@pytest.mark.parametrize(
    ("labels", "label", "expected"),
    [
        ({"node": "n1"}, "node", "n1"),
        ({"nodename": "n2"}, "nodename", "n2"),
        ({"instance": "10.0.0.1:9100"}, "instance", "node-a"),
        ({"instance": "10.0.0.2"}, "instance", "node-b"),
        ({"instance": "[fd00::2]:9100"}, "instance", "node-b"),
        ({"instance": "worker-7"}, "instance", "worker-7"),  # jsonnet style: instance = node
        ({"instance": "worker-7:9100"}, "instance", "worker-7"),
        ({"job": "x"}, "node", None),
        ({"node": ""}, "node", None),
    ],
)
def test_node_of(labels: dict[str, str], label: str, expected: str | None) -> None:
    assert node_of(labels, label, INVENTORY) == expected


def test_map_series_drops_garbage_and_keeps_highest_duplicate() -> None:
    result: list[Any] = [
        {"metric": {"node": "a"}, "value": [1, "0.25"]},
        {"metric": {"node": "b"}, "value": [1, "NaN"]},
        {"metric": {"node": "c"}, "value": [1, "+Inf"]},
        {"metric": {"node": "d"}, "value": [1, "not-a-number"]},
        {"metric": {"node": "a"}, "value": [1, "0.5"]},
        {"metric": {"node": "e"}, "value": None},
        {"metric": {"pod": "x"}, "value": [1, "1"]},
        "garbage",
        {"metric": {"node": "unknown-node"}, "value": [1, "0.1"]},
    ]
    mapped = map_series(result, "node", NodeInventory())
    assert mapped.values == {"a": 0.5, "unknown-node": 0.1}
    assert len(mapped.dropped) == 7
    assert map_series([], "node", NodeInventory()).values == {}


def test_next_snapshot_keeps_last_values_on_error() -> None:
    settings = make_settings(metrics=[{"name": "cpu"}, {"name": "mem"}])
    first = next_snapshot(empty_snapshot(settings), {"cpu": {"a": 0.1}, "mem": {"a": 0.2}}, 100.0)
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
    engine = Engine(settings, empty_snapshot(settings), clock[0])
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
    engine = Engine(settings, empty_snapshot(settings), 0.0)
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
