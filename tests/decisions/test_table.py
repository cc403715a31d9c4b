"""extender.decisions.table: the answers precomputed per snapshot, and their patches for
the herd guard."""

from __future__ import annotations

import random

import orjson

from extender.decisions.table import build_table, patch_table
from tests.harness.fixtures import NOW, make_settings, make_snapshot


def test_fragments_for_unknown_nodes() -> None:
    s = make_settings(metrics=[{"name": "cpu"}]).default
    table = build_table(s, make_snapshot({"cpu": {"a": 0.0}}), frozenset(), {}, NOW)
    assert table.fragments["a"] == b'{"Host":"a","Score":10}'
    assert table.fragments["zzz"] == b'{"Host":"zzz","Score":5}'
    assert "zzz" not in table.fragments


def test_the_whole_answer_covers_exactly_the_passing_nodes_and_leaves_out_zero_scores() -> None:
    s = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.99}}]).default
    snap = make_snapshot({"cpu": {"a": 0.0, "b": 1.0, "c": 0.5, "d": 0.97}})
    table = build_table(s, snap, frozenset(), {}, NOW)
    assert table.whole.nodes == {"a", "c", "d"}
    assert table.scores["d"] == 0
    answer = {p["Host"]: p["Score"] for p in orjson.loads(table.whole.encoded())}
    assert answer == {"a": 10, "c": 5}  # d scores 0: left out; b is rejected: never asked
    assert table.whole.encoded() is table.whole.encoded()  # joined once
    hot = patch_table(table, s, snap, {"a": 0.995}, NOW)  # a turns hot, leaves the answer
    assert hot.whole.nodes == {"c", "d"}
    assert orjson.loads(hot.whole.encoded()) == [{"Host": "c", "Score": 5}]
    assert len(orjson.loads(table.whole.encoded())) == 2  # the old table is intact


def test_patch_rescored_only_the_nodes_whose_load_changed() -> None:
    s = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9}}]).default
    snap = make_snapshot({"cpu": {"a": 0.5, "b": 0.5}})
    base = build_table(s, snap, frozenset(), {}, NOW)
    assert base.passes_all and base.ok == {"a", "b"}
    hot = patch_table(base, s, snap, {"a": 0.45}, NOW)
    assert hot.reasons == {"a": "decice: cpu above 0.9"}
    assert hot.ok == {"b"} and not hot.passes_all
    assert hot.evals["b"] is base.evals["b"]  # untouched
    assert hot.fragments["a"] == b'{"Host":"a","Score":1}'
    assert patch_table(hot, s, snap, {"a": 0.45}, NOW) is hot  # nothing changed
    cool = patch_table(hot, s, snap, {}, NOW)
    assert cool.passes_all and cool.scores == base.scores


def test_patches_one_node_at_a_time_end_where_a_fresh_build_does() -> None:
    # Most patches move a node within its score's step and copy nothing but the values;
    # the others re-score. Either way the table must be the one built from scratch.
    rng = random.Random(7)
    s = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.8}}]).default
    snap = make_snapshot({"cpu": {f"n{i}": rng.uniform(0.0, 0.8) for i in range(40)}})
    table = build_table(s, snap, frozenset(), {}, NOW)
    herd: dict[str, float] = {}
    untouched = 0
    for _ in range(300):
        node = f"n{rng.randrange(40)}"
        herd[node] = herd.get(node, 0.0) + rng.choice((0.01, 0.025, -0.02))
        before = table
        table = patch_table(table, s, snap, dict(herd), NOW, changed=(node,))
        untouched += table.whole is before.whole
        fresh = build_table(s, snap, frozenset(), dict(herd), NOW)
        assert table.scores == fresh.scores and table.reasons == fresh.reasons
        assert table.ok == fresh.ok and list(table.ranking) == list(fresh.ranking)
        assert table.whole.nodes == fresh.whole.nodes
        answer, built = orjson.loads(table.whole.encoded()), orjson.loads(fresh.whole.encoded())
        assert sorted(answer, key=str) == sorted(built, key=str)  # the scheduler reads a map
        assert table.evals == fresh.evals and table.passes_all == fresh.passes_all
    assert untouched > 100  # most patches left the answers as they were
