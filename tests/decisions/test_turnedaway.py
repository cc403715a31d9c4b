"""extender.decisions.turnedaway and Engine.recovered: which turned-away pods a new table
lets in."""

from __future__ import annotations

import orjson

from extender.decisions.engine import Engine
from extender.decisions.turnedaway import AllBut, NameDigest, TurnedAwayPods, candidates_of
from extender.decisions.wire import parse_extender_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot


def request(names: list[str], uid: str = "u-1") -> bytes:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": uid},
        "spec": {"schedulerName": "decice_sched", "containers": [{"name": "c"}]},
    }
    return orjson.dumps({"Pod": pod, "NodeNames": names, "Nodes": None})


def engine(cpu: dict[str, float]) -> Engine:
    settings = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    return Engine(settings, make_snapshot({"cpu": cpu}), NOW, TurnedAwayPods(100, 600))


def test_a_digest_has_every_name_it_was_built_from_and_few_others() -> None:
    names = [f"ip-10-0-{i // 250}-{i % 250}.compute.internal" for i in range(5000)]
    digest = NameDigest(names)
    assert all(n in digest for n in names)
    others = [f"node-{i}" for i in range(10_000)]
    false_positives = sum(n in digest for n in others)
    assert false_positives < 0.2 * len(others)  # 3 hashes, 32 Ki bits, 5,000 names: ~8%
    assert 7 not in digest


def test_a_pod_rejected_everywhere_is_remembered_and_let_go_when_a_candidate_passes() -> None:
    e = engine({"a": 0.95, "b": 0.97, "c": 0.1})
    e.filter(parse_extender_args(request(["a", "b"])), NOW)
    assert e.turned_away is not None and "u-1" in e.turned_away
    assert e.recovered(NOW) == []  # c passes, but it was not a candidate
    e.install(make_snapshot({"cpu": {"a": 0.5, "b": 0.97, "c": 0.1}}, NOW + 15), None, NOW + 15)
    back = e.recovered(NOW + 15)
    assert [(p.uid, p.namespace, p.name) for p in back] == [("u-1", "ns", "p")]
    assert "u-1" not in e.turned_away  # handed over once


def test_a_pod_that_passes_somewhere_is_not_remembered() -> None:
    e = engine({"a": 0.95, "b": 0.2})
    e.filter(parse_extender_args(request(["a"])), NOW)
    e.filter(parse_extender_args(request(["a", "b"])), NOW)
    assert e.turned_away is not None and "u-1" not in e.turned_away


def test_big_calls_keep_a_digest_and_still_recover() -> None:
    names = [f"n{i}" for i in range(1000)]
    hot = {n: 0.95 for n in names}
    e = engine(hot)
    e.filter(parse_extender_args(request(names)), NOW)
    assert e.turned_away is not None and "u-1" in e.turned_away
    assert e.recovered(NOW) == []
    cooled = {**hot, "n500": 0.3}
    e.install(make_snapshot({"cpu": cooled}, NOW + 15), None, NOW + 15)
    assert [p.uid for p in e.recovered(NOW + 15)] == ["u-1"]


def test_memory_is_bounded_and_expires() -> None:
    pods = TurnedAwayPods(capacity=2, keep=60)
    for i in range(3):
        pods.remember(f"u{i}", "ns", f"p{i}", ["a"], NOW + i)
    assert len(pods) == 2 and "u0" not in pods
    assert pods.recovered(lambda n: False, ["a"], NOW + 61.5) == []
    assert len(pods) == 1  # u1 (at NOW+1) expired at NOW+61.5
    pods.remember("", "ns", "p", ["a"], NOW)  # no UID: nothing to patch later
    pods.remember("u9", "ns", "p", [], NOW)
    assert len(pods) == 1


def test_big_calls_are_kept_as_the_nodes_left_out_or_as_a_digest() -> None:
    names = [f"n{i}" for i in range(1000)]
    known = {n: 0 for n in names}.keys()
    nearly_all = candidates_of(names[:990], known)
    assert nearly_all == AllBut(frozenset(names[990:]))  # no hashing of 990 names
    assert isinstance(candidates_of(names[:300], known), NameDigest)  # a node selector
    assert isinstance(candidates_of(names[:300]), NameDigest)  # no table known
    assert candidates_of(names[:3], known) == ("n0", "n1", "n2")


def test_a_pod_recovers_only_through_a_node_it_was_sent() -> None:
    names = [f"n{i}" for i in range(1000)]
    hot = {n: 0.95 for n in names}
    e = engine(hot)
    e.filter(parse_extender_args(request(names[:-5])), NOW)  # the last 5 were not candidates
    e.install(make_snapshot({"cpu": {**hot, "n999": 0.2}}, NOW + 15), None, NOW + 15)
    assert e.recovered(NOW + 15) == []
    e.install(make_snapshot({"cpu": {**hot, "n7": 0.2}}, NOW + 30), None, NOW + 30)
    assert [p.uid for p in e.recovered(NOW + 30)] == ["u-1"]
