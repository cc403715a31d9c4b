"""extender.decisions.explain: the numbers behind each decision, and the note on a placed pod."""

from __future__ import annotations

from typing import Any

import orjson

from extender.decisions.engine import Engine
from extender.decisions.explain import explain_nodes, explain_pod, placement_note
from extender.decisions.wire import parse_extender_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot

VALUES = {
    "cpu": {"node-1": 0.4, "node-2": 0.95, "node-3": 0.1, "node-4": 0.3},
    "memory": {"node-1": 0.5, "node-2": 0.1, "node-3": 0.2, "node-4": 0.6},
}


def engine(**policy: Any) -> Engine:
    raw: dict[str, Any] = {
        "metrics": [
            {"name": "cpu", "weight": 2, "filter": {"above": 0.9}},
            {"name": "memory", "onMissing": "fail-closed"},
        ]
    }
    raw.update(policy)
    return Engine(make_settings(**raw), make_snapshot(VALUES), NOW)


def request(names: list[str], uid: str = "u-1") -> bytes:
    pod = {
        "metadata": {"name": "web", "namespace": "shop", "uid": uid},
        "spec": {"schedulerName": "decice_sched"},
    }
    return orjson.dumps({"Pod": pod, "NodeNames": names})


def test_rows_carry_values_normalisation_weights_and_the_reason_with_its_values() -> None:
    e = engine()
    rows = explain_nodes(
        e.settings.default,
        e.snapshot,
        frozenset(),
        {"node-3": 0.25},
        ["node-1", "node-2", "node-3", "zz"],
        NOW,
    )
    assert [r["node"] for r in rows] == ["node-3", "node-1", "node-2", "zz"]  # best first
    best = rows[0]
    assert best["passed"] and best["reason"] is None
    assert best["metrics"]["cpu"] == {
        "value": 0.1,
        "herdLoad": 0.25,
        "normalised": 0.65,
        "weight": 2.0,
    }
    assert best["score"] == 7  # (2 x 0.65 + 0.8) / 3, the herd load counted
    hot = rows[2]
    assert hot["reason"] == "decice: cpu above 0.9"  # what the scheduler shows
    assert hot["detail"] == "cpu=0.95 > 0.9"  # what /explain adds
    unknown = rows[3]
    assert (
        unknown["reason"] == "decice: memory data missing"
        and unknown["detail"] == "memory: no value"
    )


def test_scores_are_the_ones_the_table_answered() -> None:
    e = engine()
    names = ["node-1", "node-2", "node-3", "node-4"]
    rows = explain_nodes(e.settings.default, e.snapshot, frozenset(), {}, names, NOW)
    assert {r["node"]: r["score"] for r in rows} == {n: e.table(NOW).scores[n] for n in names}


def test_explain_pod_after_filter_and_bind() -> None:
    e = engine()
    names = ["node-1", "node-2", "node-3", "node-4"]
    e.filter(parse_extender_args(request(names)), NOW)
    e.pods.placed("u-1", "node-3")
    memo = e.pods.find("shop", "web")
    assert memo is not None and memo is e.pods.get("u-1")
    doc = explain_pod(e.settings, memo, NOW + 5)
    assert doc["pod"] == {"namespace": "shop", "name": "web", "uid": "u-1"}
    assert (doc["placedOn"], doc["candidates"], doc["filtered"]) == ("node-3", 4, 1)
    assert doc["filteredBy"] == {"decice: cpu above 0.9": 1}
    assert doc["secondsAgo"] == 5
    assert doc["nodes"][0]["node"] == "node-3"
    note = placement_note(doc["nodes"], "node-3", ["cpu", "memory"])
    assert note == (
        "placed on node-3: score 9/10 (cpu 0.10, memory 0.20); 4 candidates, 1 filtered "
        "(cpu above 0.9); next best node-1 score 6"
    )


def test_max_nodes_keeps_the_chosen_node_listed() -> None:
    e = engine(explain={"maxNodes": 1})
    e.filter(parse_extender_args(request(["node-1", "node-3", "node-4"])), NOW)
    e.pods.placed("u-1", "node-1")
    memo = e.pods.get("u-1")
    assert memo is not None
    doc = explain_pod(e.settings, memo, NOW)
    assert [r["node"] for r in doc["nodes"]] == ["node-3", "node-1"]
    assert doc["omitted"] == 1


def test_old_decisions_keep_their_summary_once_the_snapshot_is_gone() -> None:
    e = engine()
    e.filter(parse_extender_args(request(["node-1", "node-2"])), NOW)
    for i in range(9):  # nine newer snapshots: the first decision's is let go
        e.install(make_snapshot(VALUES, fetched_at=NOW + i + 1), None, NOW + i + 1)
        e.filter(parse_extender_args(request(["node-1"], uid=f"other-{i}")), NOW + i + 1)
    memo = e.pods.get("u-1")
    assert memo is not None and memo.snapshot is None
    doc = explain_pod(e.settings, memo, NOW + 10)
    assert doc["filtered"] == 1 and "nodes" not in doc and "gone" in doc["detail"]
    recent = e.pods.get("other-8")
    assert recent is not None and recent.snapshot is e.snapshot
