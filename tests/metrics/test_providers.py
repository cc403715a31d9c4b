"""extender.metrics: series -> node mapping and the providers (no network)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.decisions.model import NodeInfo, NodeInventory
from extender.metrics.providers import map_series, node_of

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
