"""extender.decisions.table: the answers precomputed per snapshot, and their patches for
the herd guard."""

from __future__ import annotations

import random

import orjson
import pytest

from extender.decisions.headroom import Sizes
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


@pytest.mark.parametrize("seed", [7, 11, 23, 101])
def test_patches_one_node_at_a_time_end_where_a_fresh_build_does(seed: int) -> None:
    # Most patches move a node within its score's step and copy nothing but the values;
    # the others re-score, and some cross the filter's threshold and back. Whatever the
    # path, the patched table must be the one built from scratch: the same verdicts, scores,
    # ranking, headroom and, byte for byte, the same answers.
    rng = random.Random(seed)
    n = rng.choice((40, 150, 300))  # several chunks of the whole answer at 150 and 300
    settings = make_settings(
        metrics=[
            {"name": "cpu", "weight": 2, "filter": {"above": 0.8}},
            {"name": "memory", "onMissing": "fail-open"},
        ],
        herdGuard={"enabled": True, "metric": "cpu"},
    )
    s = settings.default
    names = [f"n{i:03}" for i in range(n)]
    snap = make_snapshot(
        {
            "cpu": {x: rng.uniform(0.0, 0.85) for x in names},
            "memory": {x: rng.uniform(0.0, 1.0) for x in names if rng.random() < 0.9},
        }
    )
    sizes = Sizes({x: rng.choice((2.0, 4.0, 16.0)) for x in names}, None)
    table = build_table(s, snap, frozenset(), {}, NOW, sizes)
    herd: dict[str, float] = {}
    untouched = kept_nodes = 0
    for _ in range(300):
        node = rng.choice(names)
        herd[node] = max(0.0, herd.get(node, 0.0) + rng.choice((0.01, 0.025, -0.02, 0.3, -0.3)))
        if herd[node] == 0.0 and rng.random() < 0.5:
            del herd[node]
        before = table
        table = patch_table(table, s, snap, dict(herd), NOW, changed=(node,), sizes=sizes)
        untouched += table.whole is before.whole
        kept_nodes += table.whole.nodes is before.whole.nodes
        fresh = build_table(s, snap, frozenset(), dict(herd), NOW, sizes)
        assert table.evals == fresh.evals and list(table.evals) == list(fresh.evals)
        assert table.scores == fresh.scores and table.reasons == fresh.reasons
        assert dict(table.fragments) == dict(fresh.fragments)
        assert table.ok == fresh.ok and table.passes_all == fresh.passes_all
        assert list(table.ranking) == list(fresh.ranking)
        assert table.whole.nodes == fresh.whole.nodes
        assert table.whole.encoded() == fresh.whole.encoded()  # byte for byte
        assert table.headroom is not None and fresh.headroom is not None
        assert {x: table.headroom.for_node(x) for x in names} == {
            x: fresh.headroom.for_node(x) for x in names
        }
        for cores in (0.1, 0.5, 2.0):
            assert table.headroom.too_small(cores) == fresh.headroom.too_small(cores)
    assert untouched > 30  # some patches left the answers as they were
    assert kept_nodes > 150  # most kept the passing set, and its identity
