"""extender.decisions.headroom: the headroom each node has for one more pod, and the filter
that counts the pod being placed (its expected use) under the herd metric's threshold."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from extender.decisions.engine import Engine
from extender.decisions.headroom import FitRule, Headroom, Sizes, overflow_node, tight_nodes
from extender.decisions.scoring import NodeEval
from extender.decisions.turnedaway import TurnedAwayPods
from extender.decisions.wire import encode_filter, parse_extender_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot

RULE = FitRule("cpu", 0, 0.9)


def test_spare_is_the_headroom_added_up_over_every_sized_nodes_cores() -> None:
    evals = {
        "a": NodeEval(None, 0.0, (0.5,)),  # 8 cores: 3.2 under 0.9
        "b": NodeEval(None, 0.0, (0.8,)),  # 4 cores: 0.4
        "c": NodeEval("decice: cpu above 0.9", 0.0, (0.95,)),  # 8 cores, not indexed
    }
    headroom = Headroom.index(RULE, evals, Sizes({"a": 8.0, "b": 4.0, "c": 8.0}, None))
    assert headroom.cluster_cores == 20.0 and headroom.spare() == pytest.approx(3.6 / 20)
    fuller = headroom.with_changes({"a": 1.2, "b": None})  # a filled, b over now
    assert fuller.spare() == pytest.approx(1.2 / 20)
    unsized = Headroom.index(RULE, evals, Sizes({"a": 8.0, "b": 4.0}, None))  # c: no size
    assert unsized.spare() == pytest.approx(3.6 / 12)
    assert Headroom.of({"a": 1.0}).spare() == 0.0  # no size known: no room counted


def test_headroom_finds_the_nodes_too_small_in_order() -> None:
    headroom = Headroom.of({"a": 0.5, "b": 2.0, "c": 4.0})
    assert headroom.too_small(0.1) == []
    assert headroom.too_small(1.0) == ["a"]
    assert headroom.too_small(3.0) == ["a", "b"]
    assert headroom.most() == 4.0 and headroom.for_node("zz") == math.inf
    moved = headroom.with_changes({"a": 5.0, "c": None, "d": 0.2})
    assert moved.too_small(1.0) == ["d"] and moved.most() == 5.0 and len(moved) == 3
    assert headroom.too_small(1.0) == ["a"]  # the original is untouched


@pytest.mark.parametrize(
    ("needs", "tight"),
    [
        (0.1, set()),  # fits everywhere: the common case
        (1.0, {"a"}),  # fits on b and c
        (5.0, {"a", "b", "c"}),  # fits nowhere
    ],
)
def test_tight_nodes(needs: float, tight: set[str]) -> None:
    headroom = Headroom.of({"a": 0.5, "b": 2.0, "c": 4.0})
    assert tight_nodes(headroom, needs, ["a", "b", "c"], {}) == tight


def test_a_node_failed_anyway_is_not_counted_twice() -> None:
    headroom = Headroom.of({"a": 0.5, "b": 2.0})
    assert tight_nodes(headroom, 1.0, ["a", "b", "x"], {"x": "hot"}) == {"a"}


def test_the_overflow_node_has_the_most_headroom_and_a_value() -> None:
    evals = {
        "a": NodeEval("decice: cpu above 0.9", 0.0, (0.95,)),  # 8 cores: -0.4 core
        "b": NodeEval(None, 0.0, (0.85,)),  # 4 cores: 0.2 core
        "c": NodeEval("decice: cpu data missing", 0.0, (None,)),
    }
    sizes = Sizes({"a": 8.0, "b": 4.0}, 4.0)
    assert overflow_node(RULE, evals, ["a", "b", "c"], sizes) == "b"
    assert overflow_node(RULE, evals, ["a", "c"], sizes) == "a"
    assert overflow_node(RULE, evals, ["c", "x"], sizes) is None


def pod(uid: str, cpu: str) -> dict[str, object]:
    return {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def ask(e: Engine, uid: str, cpu: str, names: list[str], now: float) -> dict[str, Any]:
    args = parse_extender_args(orjson.dumps({"Pod": pod(uid, cpu), "NodeNames": names}))
    answer: dict[str, Any] = orjson.loads(encode_filter(args, e.filter(args, now)))
    return answer


def test_the_filter_counts_the_pod_and_lets_it_wait_then_onto_the_most_headroom() -> None:
    """4-core nodes (the default size) at 0.3 and 0.7, a pod of 1 core placed on a a moment
    ago (0.55 with it): a 1-core pod fits on a (0.8) not on b (0.95); a 2-core pod fits on
    neither now but on a once that reservation fades, so it waits, then goes to a, the
    roomiest."""
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}], herdGuard={"waitForRoom": 60.0}
    )
    e = Engine(settings, make_snapshot({"cpu": {"a": 0.3, "b": 0.7}}), NOW)
    e.turned_away = TurnedAwayPods(100, 600)
    assert e.reserve("placed", "a", 1.0, NOW)
    one = ask(e, "p1", "1", ["a", "b"], NOW)
    assert one["NodeNames"] == ["a"]  # b is too small for it, and says so
    assert one["FailedAndUnresolvableNodes"] == {"b": "decice: cpu above 0.9 with this pod"}
    assert one["FailedNodes"] == {}
    two = ask(e, "p2", "2", ["a", "b"], NOW)
    # Too small everywhere: unresolvable (the scheduler's preemption, picking victims by
    # its own filters, which both nodes pass, can free nothing there).
    assert two["NodeNames"] == [] and set(two["FailedAndUnresolvableNodes"]) == {"a", "b"}
    assert two["FailedNodes"] == {}
    assert "p2" in e.turned_away
    assert ask(e, "p2", "2", ["a", "b"], NOW + 59)["NodeNames"] == []
    later = ask(e, "p2", "2", ["a", "b"], NOW + 60)
    assert later["NodeNames"] == ["a"] and list(later["FailedAndUnresolvableNodes"]) == ["b"]
    # /explain says why b was left out for p1
    memo = e.pods.get("p1")
    assert memo is not None and memo.rejected == {"b"}
    assert "p2" not in e.turned_away


def test_a_pod_waiting_for_room_is_requeued_when_a_node_has_it_or_its_wait_ends() -> None:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}], herdGuard={"waitForRoom": 60.0}
    )
    e = Engine(settings, make_snapshot({"cpu": {"a": 0.3, "b": 0.3}}), NOW)
    e.turned_away = TurnedAwayPods(100, 600)
    assert e.reserve("r-a", "a", 1.0, NOW) and e.reserve("r-b", "b", 2.0, NOW)
    ask(e, "big", "2", ["a", "b"], NOW)  # needs 2 cores; a has 1.4, b 0.4 (2.4 when faded)
    assert e.recovered(NOW + 10) == []  # still no room, still waiting
    e.install(make_snapshot({"cpu": {"a": 0.1, "b": 0.3}}, fetched_at=NOW + 15), None, NOW + 15)
    assert [p.uid for p in e.recovered(NOW + 15)] == ["big"]  # a has 2.2 cores now
    e.install(make_snapshot({"cpu": {"a": 0.4, "b": 0.3}}, fetched_at=NOW + 16), None, NOW + 16)
    ask(e, "big2", "2", ["a", "b"], NOW + 16)  # a 1.0 + 0.25 ours: fits nowhere now
    assert e.recovered(NOW + 30) == []
    assert [p.uid for p in e.recovered(NOW + 76)] == ["big2"]  # its wait ended


def test_off_the_pod_is_not_counted() -> None:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}], herdGuard={"fit": False}
    )
    e = Engine(settings, make_snapshot({"cpu": {"a": 0.5, "b": 0.7}}), NOW)
    assert ask(e, "p1", "2", ["a", "b"], NOW)["NodeNames"] == ["a", "b"]


def test_node_sizes_move_the_headroom() -> None:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}], herdGuard={"spareRoom": 1.0}
    )
    e = Engine(settings, make_snapshot({"cpu": {"a": 0.5, "b": 0.5}}), NOW)
    assert e.reserve("r-a", "a", 0.8, NOW) and e.reserve("r-b", "b", 0.8, NOW)  # 0.7 now
    assert ask(e, "p1", "1", ["a", "b"], NOW)["NodeNames"] == []  # 4 cores: 0.2 x 4 < 1
    e.set_node_cores({"a": 8.0})  # a: 0.5 + 0.1 ours: 2.4 cores of headroom
    assert ask(e, "p2", "1", ["a", "b"], NOW)["NodeNames"] == ["a"]


def test_explain_names_the_nodes_too_small_for_the_pod() -> None:
    from extender.decisions.explain import explain_pod

    settings = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    e = Engine(settings, make_snapshot({"cpu": {"a": 0.5, "b": 0.7}}), NOW)
    ask(e, "p1", "1", ["a", "b"], NOW)
    memo = e.pods.get("p1")
    assert memo is not None
    doc = explain_pod(settings, memo, NOW)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert rows["a"]["passed"] and not rows["b"]["passed"]
    assert rows["b"]["reason"] == "decice: cpu above 0.9 with this pod"
    assert doc["filteredBy"] == {"decice: cpu above 0.9 with this pod": 1}


def test_a_pod_that_waited_its_wait_goes_where_it_does_least_harm() -> None:
    """Every node over the threshold: pods wait waitForRoom (since they were created,
    when that is known), then each goes to the node with the most headroom left (the least
    over), counted there once bound. A node rejected for data it lacks, or for another
    metric, never takes one."""
    settings = make_settings(
        metrics=[
            {"name": "cpu", "filter": {"above": 0.9}},
            {"name": "mem", "filter": {"above": 0.9}, "onMissing": "fail-closed"},
        ],
        herdGuard={"waitForRoom": 30.0, "settle": 20.0},
    )
    cpu = {"a": 0.95, "b": 0.97, "c": 0.91, "d": 0.5}
    e = Engine(settings, make_snapshot({"cpu": cpu, "mem": {"a": 0.1, "b": 0.1, "d": 0.99}}), NOW)
    e.turned_away = TurnedAwayPods(100, 600)
    nodes = ["a", "b", "c", "d"]
    for uid in ("p", "q", "r"):
        first = ask(e, uid, "100m", nodes, NOW)
        assert first["NodeNames"] == [] and uid in e.turned_away
    assert ask(e, "p", "100m", nodes, NOW + 29)["NodeNames"] == []
    p = ask(e, "p", "100m", nodes, NOW + 30)
    assert p["NodeNames"] == ["a"]  # c has no mem value (missing), d is over on mem
    assert set(p["FailedAndUnresolvableNodes"]) == {"b", "c", "d"}
    assert "p" not in e.turned_away
    assert e.reserve("p", "a", 0.5, NOW + 30)  # bound there: a has less headroom than b now
    assert ask(e, "q", "100m", nodes, NOW + 31)["NodeNames"] == ["b"]
    old = pod("r", "100m")
    old["metadata"]["creationTimestamp"] = "2027-01-15T07:59:00Z"  # type: ignore[index]
    args = parse_extender_args(orjson.dumps({"Pod": old, "NodeNames": nodes}))
    answer = orjson.loads(encode_filter(args, e.filter(args, NOW + 32)))
    assert answer["NodeNames"] == ["b"]  # created NOW - 60: its wait was over on arrival


def test_a_pod_too_big_for_every_node_of_a_cluster_with_room_goes_at_once() -> None:
    """Three 8-core nodes at 0.5, 0.25 and 0.3 (threshold 0.9: 3.2 + 5.2 + 4.8 cores of
    headroom, 55 % of the cluster's 24): a 5.5-core pod fits under the threshold nowhere, and
    waiting for one node to free that much would keep it for nothing: it goes at once to the
    one with the most headroom that it leaves under 100 % (b: 0.25 + 0.69). A pod no node
    can hold under 100 % waits; so does the pod where the headroom is under spareRoom."""
    metrics = [{"name": "cpu", "filter": {"above": 0.9}}]
    sizes = {"a": 8.0, "b": 8.0, "c": 8.0}
    snapshot = make_snapshot({"cpu": {"a": 0.5, "b": 0.25, "c": 0.3}})
    e = Engine(make_settings(metrics=metrics), snapshot, NOW)
    e.set_node_cores(sizes)
    headroom = e.table(NOW).headroom  # resized: 24 cores now, not 3 x the default 4
    assert headroom is not None and headroom.spare() == pytest.approx(13.2 / 24)
    assert ask(e, "seven", "7", ["a", "b", "c"], NOW)["NodeNames"] == []  # past any capacity
    at_once = ask(e, "one", "5500m", ["a", "b", "c"], NOW)
    assert at_once["NodeNames"] == ["b"]
    assert set(at_once["FailedAndUnresolvableNodes"]) == {"a", "c"}
    assert e.reserve("one", "b", 5.5, NOW)  # bound there
    assert ask(e, "two", "5500m", ["a", "b", "c"], NOW)["NodeNames"] == ["c"]
    guard = {"spareRoom": 0.6, "waitForRoom": 60.0}
    waits = Engine(make_settings(metrics=metrics, herdGuard=guard), snapshot, NOW)
    waits.set_node_cores(sizes)
    assert ask(waits, "one", "5500m", ["a", "b", "c"], NOW)["NodeNames"] == []
    assert ask(waits, "one", "5500m", ["a", "b", "c"], NOW + 60)["NodeNames"] == ["b"]
