"""extender.decisions.nodes: the node cache a node watch keeps current (fixture-shaped nodes)."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from extender.decisions.nodes import NodeCache, node_info
from tests.harness.fixtures import APISERVER

LISTED = orjson.loads((APISERVER / "list-nodes-limit-1.json").read_bytes())["response"]
NODE: dict[str, Any] = LISTED["items"][0]


def node(name: str, ip: str, cpu: str = "4") -> dict[str, Any]:
    doc = copy.deepcopy(NODE)
    doc["metadata"]["name"] = name
    doc["status"]["addresses"] = [
        {"type": "InternalIP", "address": ip},
        {"type": "Hostname", "address": name},
    ]
    doc["status"]["allocatable"]["cpu"] = cpu
    return doc


def test_a_node_as_the_api_returns_it() -> None:
    info = node_info(NODE)
    assert info.name == "node-1"
    assert info.cpu_cores is not None and info.cpu_cores > 0
    assert info.internal_ips  # the fixture node has an InternalIP


def test_list_then_events_keep_the_inventory_current() -> None:
    cache = NodeCache()
    assert cache.inventory().by_ip == {}
    cache.replace([node_info(node("a", "10.0.0.1")), node_info(node("b", "10.0.0.2", "8"))])
    inventory = cache.inventory()
    assert inventory.by_ip == {"10.0.0.1": "a", "10.0.0.2": "b"}
    assert inventory.cpu_cores == {"a": 4.0, "b": 8.0}
    assert cache.apply("MODIFIED", node("a", "10.0.0.1"))  # a heartbeat: nothing changed
    assert cache.inventory() is inventory  # not rebuilt
    cache.apply("ADDED", node("c", "10.0.0.3", "500m"))
    cache.apply("MODIFIED", node("b", "10.0.0.9", "8"))
    cache.apply("DELETED", node("a", "10.0.0.1"))
    inventory = cache.inventory()
    assert inventory.by_ip == {"10.0.0.9": "b", "10.0.0.3": "c"}
    assert inventory.cpu_cores == {"b": 8.0, "c": 0.5}
    assert len(cache) == 2


def test_unreadable_objects_are_ignored() -> None:
    cache = NodeCache()
    bad_nodes: list[Any] = [
        None,
        {},
        {"metadata": {}},
        "node",
        {"metadata": {"name": "x"}, "status": 3},
    ]
    for bad in bad_nodes:
        assert not cache.apply("ADDED", bad)
    assert len(cache) == 0
