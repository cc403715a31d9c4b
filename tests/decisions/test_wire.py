"""Every captured kube-scheduler body round-trips: parsed, decided, answered as captured."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender.decisions.engine import Engine
from extender.decisions.wire import (
    WireError,
    parse_binding_args,
    parse_extender_args,
    parse_preemption_args,
)
from tests.harness.fixtures import (
    NOW,
    SCHEDULER,
    filter_answer,
    fixture_bytes,
    fixture_json,
    make_settings,
    make_snapshot,
    preempt_answer,
    prioritize_answer,
)

# Scores the captured answer used: cpu 0.4 -> 6, 0.7 -> 3, 0.1 -> 9, 0.3 -> 7.
CAPTURED_CPU = {"node-1": 0.4, "node-2": 0.7, "node-3": 0.1, "node-4": 0.1, "node-5": 0.3}


def engine(**policy: Any) -> Engine:
    settings = make_settings(
        static={"nodes": {n: {"cpu": v} for n, v in CAPTURED_CPU.items()}}, **policy
    )
    return Engine(settings, make_snapshot({"cpu": CAPTURED_CPU}), NOW)


def test_every_request_fixture_parses() -> None:
    requests = [p.name for p in SCHEDULER.glob("*.json") if not p.name.endswith(".response.json")]
    assert len(requests) == 9
    for name in requests:
        body = fixture_bytes(name)
        if name.startswith(("filter", "prioritize")):
            args = parse_extender_args(body)
            assert args.pod.name == "with-requests" or args.pod.name
            assert args.pod.scheduler_name == "decice_sched"
            assert all(n.startswith("node-") for n in args.names)
        elif name.startswith("preempt"):
            assert parse_preemption_args(body).victims
        else:
            b = parse_binding_args(body)
            assert (b.pod_name, b.pod_namespace, b.node) == ("with-requests", "decice", "node-4")


def test_filter_answers_equal_the_captured_answers() -> None:
    e = engine()
    for form in ("nodecache", "fullnodes"):
        out = filter_answer(e, parse_extender_args(fixture_bytes(f"filter-{form}.json")))
        assert orjson.loads(out) == fixture_json(f"filter-{form}.response.json")


def test_prioritize_answers_equal_the_captured_answers() -> None:
    e = engine()
    for form in ("nodecache", "fullnodes"):
        body = prioritize_answer(e, parse_extender_args(fixture_bytes(f"prioritize-{form}.json")))
        assert orjson.loads(body) == fixture_json(f"prioritize-{form}.response.json")


def test_preempt_answers_equal_the_captured_answers_in_both_forms() -> None:
    e = engine()
    for form in ("nodecache", "fullnodes"):
        body = preempt_answer(e, parse_preemption_args(fixture_bytes(f"preempt-{form}.json")))
        captured = fixture_json(f"preempt-{form}.response.json")
        assert orjson.loads(body) == captured
    # Victims are kept exactly as given: same UIDs as in the full-pod request.
    full = fixture_json("preempt-fullnodes.json")["NodeNameToVictims"]
    meta = orjson.loads(
        preempt_answer(e, parse_preemption_args(fixture_bytes("preempt-fullnodes.json")))
    )
    for node, victims in full.items():
        uids = [p["metadata"]["uid"] for p in victims["Pods"]]
        assert [p["UID"] for p in meta["NodeNameToMetaVictims"][node]["Pods"]] == uids


def test_filter_failures_in_both_forms_answer_in_the_form_asked() -> None:
    # The pod-aware fit has its own test below: here every node keeps room for the pod.
    e = engine(metrics=[{"name": "cpu", "filter": {"above": 0.5}}], herdGuard={"fit": False})
    names = orjson.loads(
        filter_answer(e, parse_extender_args(fixture_bytes("filter-nodecache.json")))
    )
    assert names["Nodes"] is None
    assert names["NodeNames"] == ["node-1", "node-3", "node-4", "node-5"]
    assert names["FailedAndUnresolvableNodes"] == {"node-2": "decice: cpu above 0.5"}
    assert set(names) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    full = orjson.loads(
        filter_answer(e, parse_extender_args(fixture_bytes("filter-fullnodes.json")))
    )
    assert full["NodeNames"] is None
    kept = [n["metadata"]["name"] for n in full["Nodes"]["items"]]
    assert kept == ["node-1", "node-3", "node-4", "node-5"]
    original = {
        n["metadata"]["name"]: n for n in fixture_json("filter-fullnodes.json")["Nodes"]["items"]
    }
    assert all(item == original[item["metadata"]["name"]] for item in full["Nodes"]["items"])
    # Preemption on a node our filter rejects is dropped; the others keep their victims
    # (herd guard off: the preemptor's 2 cores would weigh on these 4-core default nodes,
    # see test_preemption.py).
    unguarded = engine(
        metrics=[{"name": "cpu", "filter": {"above": 0.5}}], herdGuard={"enabled": False}
    )
    pre = orjson.loads(
        preempt_answer(unguarded, parse_preemption_args(fixture_bytes("preempt-nodecache.json")))
    )
    assert sorted(pre["NodeNameToMetaVictims"]) == ["node-1", "node-3", "node-4", "node-5"]


def test_nominated_retry_and_nodeselector_subsets() -> None:
    e = engine()
    one = orjson.loads(
        filter_answer(e, parse_extender_args(fixture_bytes("filter-nodecache-nominated.json")))
    )
    assert one["NodeNames"] == ["node-4"]
    three = parse_extender_args(fixture_bytes("filter-nodecache-nodeselector.json"))
    assert orjson.loads(filter_answer(e, three))["NodeNames"] == three.names


def test_pods_of_other_schedulers_pass_through() -> None:
    e = engine(metrics=[{"name": "cpu", "filter": {"above": 0.1}}])
    data = fixture_json("filter-nodecache.json")
    data["Pod"]["spec"]["schedulerName"] = "default-scheduler"
    args = parse_extender_args(orjson.dumps(data))
    assert orjson.loads(filter_answer(e, args))["NodeNames"] == args.names
    assert orjson.loads(prioritize_answer(e, args)) == []  # every host asked scores 0
    assert len(e.pods) == 0  # not remembered for bind


def test_names_that_are_exactly_the_given_set_need_no_other_check() -> None:
    pod = {"metadata": {"name": "p"}}
    nodes = frozenset({"a", "b", "c"})

    def parse(names: list[Any]) -> Any:
        body = orjson.dumps({"Pod": pod, "NodeNames": names})
        return parse_extender_args(body, lambda facts: nodes if facts.name == "p" else frozenset())

    assert parse(["c", "a", "b"]).exactly is nodes
    assert parse(["c", "a", "a"]).exactly is nodes  # b was not asked: ignored in an answer
    for names in (["a", "b"], ["a", "b", "c", "d"], ["a", "b", "zz"]):
        assert parse(names).exactly is None
    bad: list[tuple[list[Any], int]] = [
        ([1, "a", "b"], 0),
        (["a", "", "b"], 1),
        (["a", "b", ["c"]], 2),
    ]
    for entries, index in bad:
        with pytest.raises(WireError, match=rf"NodeNames\[{index}\]"):
            parse(entries)


def test_pod_facts_read_requests() -> None:
    args = parse_extender_args(fixture_bytes("filter-nodecache.json"))
    assert args.pod.uid == "9e764942-ad6e-420d-b0b4-8a8d15daa8fb"
    assert args.pod.cpu_request == 0.5


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty request body"),
        (b"{", "not valid JSON"),
        (b"[]", "must be a JSON ExtenderArgs object, got list"),
        (b'{"NodeNames": ["a"]}', "ExtenderArgs: missing field 'Pod'"),
        (b'{"Pod": null, "NodeNames": ["a"]}', "Pod: must be an object, got NoneType"),
        (b'{"Pod": {}, "NodeNames": ["a"]}', "Pod: missing field 'metadata'"),
        (
            b'{"Pod": {"metadata": {"name": 5}}, "NodeNames": ["a"]}',
            "Pod.metadata.name: must be str",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": null, "Nodes": null}',
            "both NodeNames and Nodes are null",
        ),
        (b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}', "node list is empty"),
        (b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "a"}', "NodeNames: must be a list"),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{}]}}',
            "Nodes.items[0]: missing field 'metadata'",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, '
            b'"Nodes": {"items": [{"metadata": {"name": ""}}]}}',
            "Nodes.items[0].metadata.name: must be a non-empty string",
        ),
        (b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": []}', "Nodes: must be a v1.NodeList"),
        (
            b'{"Pod": {"metadata": {"name": "p"}, "spec": [1]}, "NodeNames": ["a"]}',
            "Pod.spec: must be an object",
        ),
    ],
)
def test_bad_extender_args(body: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_extender_args(body)


def test_bad_names_found_where_the_body_is_decoded() -> None:
    for names in ([1, 2], ["node-1", None], ["node-1", ""], [["x"]], [{"a": 1}]):
        body = orjson.dumps(
            {
                "Pod": {"metadata": {"name": "p"}, "spec": {"schedulerName": "decice_sched"}},
                "NodeNames": names,
            }
        )
        with pytest.raises(WireError, match="NodeNames"):
            parse_extender_args(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"PodName": "p", "PodNamespace": "n", "PodUID": "u"}', "missing field 'Node'"),
        (
            b'{"PodName": "p", "PodNamespace": "n", "PodUID": "u", "Node": 3}',
            "Node: must be a string, got int",
        ),
        (
            b'{"PodName": "", "PodNamespace": "n", "PodUID": "u", "Node": "x"}',
            "PodName: must be a non-empty string",
        ),
    ],
)
def test_bad_binding_args(body: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        parse_binding_args(body)


def test_bad_preemption_args() -> None:
    pod = {"metadata": {"name": "p"}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"Pod": pod, "NodeNameToMetaVictims": []}, "NodeNameToMetaVictims: must be an object"),
        (
            {"Pod": pod, "NodeNameToMetaVictims": {"m": {}, "n": {"Pods": [{"UID": 1}]}}},
            r"NodeNameToMetaVictims\['n'\].Pods\[0\].UID: must be a string",
        ),
        (
            {"Pod": pod, "NodeNameToVictims": {"n": {"Pods": [{}]}}},
            r"Pods\[0\]: missing field 'metadata'",
        ),
        (
            {"Pod": pod, "NodeNameToVictims": {"n": {"Pods": [{"metadata": {}}]}}},
            r"NodeNameToVictims\['n'\].Pods\[0\].metadata: missing field 'uid'",
        ),
        (
            {"Pod": pod, "NodeNameToMetaVictims": {"n": {"NumPDBViolations": "x"}}},
            "NumPDBViolations",
        ),
    ]
    for body, message in cases:
        with pytest.raises(WireError, match=message):
            parse_preemption_args(orjson.dumps(body))
    assert parse_preemption_args(orjson.dumps({"Pod": pod})).victims == {}


def test_nodes_too_small_for_the_pod_in_both_forms() -> None:
    """The captured pod requests 500m (no workload measured): 0.125 of a 4-core node. With
    the threshold at 0.5, node-1 at 0.4 would cross it with the pod, while node-2 at 0.7 is
    over it already. Every node asked is accounted for, unresolvable with its reason,
    whether the pod fits elsewhere or not (threshold 0.25: node-3 and node-4 at 0.1, each
    with 0.2 core of a pod placed a moment ago, are too small for it until that fades):
    kube-scheduler's preemption picks victims by its own filters, which these nodes pass,
    so it could free nothing there."""
    e = engine(metrics=[{"name": "cpu", "filter": {"above": 0.5}}])
    for fixture in ("filter-nodecache.json", "filter-fullnodes.json"):
        answer = orjson.loads(filter_answer(e, parse_extender_args(fixture_bytes(fixture))))
        assert answer["FailedAndUnresolvableNodes"] == {
            "node-2": "decice: cpu above 0.5",
            "node-1": "decice: cpu above 0.5 with this pod",
        }
        assert answer["FailedNodes"] == {}
        kept = answer["NodeNames"] or [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
        assert kept == ["node-3", "node-4", "node-5"]
    # The captured pod was created long before NOW: a wait counted from its creation is
    # over at once, so the wait is made long enough to see it wait (test_headroom has the rest).
    e = engine(metrics=[{"name": "cpu", "filter": {"above": 0.25}}], herdGuard={"waitForRoom": 1e9})
    assert e.reserve("r-3", "node-3", 0.2, NOW) and e.reserve("r-4", "node-4", 0.2, NOW)
    for fixture in ("filter-nodecache.json", "filter-fullnodes.json"):
        answer = orjson.loads(filter_answer(e, parse_extender_args(fixture_bytes(fixture))))
        small = "decice: cpu above 0.25 with this pod"
        failed = answer["FailedAndUnresolvableNodes"]
        assert set(failed) == {"node-1", "node-2", "node-3", "node-4", "node-5"}
        assert failed["node-3"] == failed["node-4"] == small
        assert answer["FailedNodes"] == {}
        assert not (answer["NodeNames"] or (answer["Nodes"] or {}).get("items"))


def test_a_bad_victim_before_deep_nesting_is_a_wire_error() -> None:
    """The node of a bad victim is found by decoding again; nesting past msgspec's depth
    after the bad field (which the first decode never reached) still makes a 400."""
    deep = b"[" * 100_000 + b"]" * 100_000
    body = (
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToVictims": {"n": {"Pods": '
        b'[{"metadata": {"uid": 1}, "x": ' + deep + b"}]}}}"
    )
    with pytest.raises(WireError, match=r"NodeNameToVictims\[...\].Pods\[0\].metadata.uid"):
        parse_preemption_args(body)
