"""Pure scoring and filtering: table-driven, no I/O, `now` passed in."""

from __future__ import annotations

import math
from typing import Any

import pytest

from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.scoring import (
    score_candidates,
    stale_metrics,
    tie_start,
    to_score,
    top_hosts,
)
from extender.decisions.table import build_table, patch_table
from extender.policy.policies import Policy
from tests.harness.fixtures import NOW, make_settings, make_snapshot


def cpu(**metric: Any) -> Policy:
    return make_settings(metrics=[{"name": "cpu", **metric}]).default


@pytest.mark.parametrize(
    ("value", "direction", "expected"),
    [
        (0.0, "lower", 10),
        (1.0, "lower", 0),
        (0.25, "lower", 8),  # 7.5 rounds half up
        (0.35, "lower", 7),  # 6.5 -> 7
        (0.25, "higher", 3),  # 2.5 -> 3
        (-5.0, "lower", 10),  # clamped below min
        (9.0, "lower", 0),  # clamped above max
    ],
)
def test_range_score(value: float, direction: str, expected: int) -> None:
    s = cpu(direction=direction)
    table = build_table(s, make_snapshot({"cpu": {"n": value}}), frozenset(), {}, NOW)
    assert table.scores["n"] == expected


def test_weighted_sum_of_metrics_with_min_max() -> None:
    s = make_settings(
        metrics=[
            {"name": "cpu", "weight": 3},
            {"name": "latency", "weight": 1, "min": 0, "max": 200, "direction": "lower"},
            {"name": "free", "weight": 1, "min": 0, "max": 64, "direction": "higher"},
        ]
    ).default
    snap = make_snapshot({"cpu": {"n": 0.2}, "latency": {"n": 50}, "free": {"n": 16}})
    table = build_table(s, snap, frozenset(), {}, NOW)
    # (3*0.8 + 1*0.75 + 1*0.25) / 5 = 0.68 -> 6.8 -> 7
    assert table.scores["n"] == 7


def test_threshold_reason_names_metric_value_and_threshold() -> None:
    s = cpu(filter={"above": 0.9})
    table = build_table(s, make_snapshot({"cpu": {"hot": 0.95, "ok": 0.9}}), frozenset(), {}, NOW)
    assert table.reasons == {"hot": "decice: cpu above 0.9"}
    assert "ok" in table.ok and "hot" not in table.ok
    low = cpu(filter={"below": 0.1}, direction="higher")
    t2 = build_table(low, make_snapshot({"cpu": {"n": 0.05}}), frozenset(), {}, NOW)
    assert t2.reasons["n"] == "decice: cpu below 0.1"


def test_fail_open_missing_is_neutral_and_passes() -> None:
    s = cpu(filter={"above": 0.9})
    table = build_table(s, make_snapshot({"cpu": {"a": 0.1}}), frozenset(), {}, NOW)
    assert table.unknown.reason is None
    assert table.unknown_score == 5
    nan = build_table(s, make_snapshot({"cpu": {"a": math.nan}}), frozenset(), {}, NOW)
    assert nan.scores["a"] == 5 and "a" in nan.ok


def test_fail_closed_missing_is_filtered_with_reason() -> None:
    s = cpu(onMissing="fail-closed")
    table = build_table(s, make_snapshot({"cpu": {"a": 0.1}}), frozenset(), {}, NOW)
    assert table.unknown.reason == "decice: cpu data missing"
    assert table.unknown_score == 0


def test_staleness_by_max_age() -> None:
    s = cpu(onMissing="fail-closed", maxAge=30)
    snap = make_snapshot({"cpu": {"a": 0.1}}, fetched_at=NOW - 31)
    assert stale_metrics(s, snap, NOW) == frozenset({"cpu"})
    assert stale_metrics(s, snap, NOW - 2) == frozenset()
    table = build_table(s, snap, stale_metrics(s, snap, NOW), {}, NOW)
    assert table.reasons["a"] == "decice: cpu data older than 30s"
    never = Snapshot(metrics={"cpu": MetricSeries(error="ConnectionError: refused")}, taken_at=NOW)
    t2 = build_table(s, never, stale_metrics(s, never, NOW), {}, NOW)
    assert t2.unknown.reason == "decice: cpu data missing"


def test_candidates_normalisation_least_cpu_wins() -> None:
    s = cpu(normalize="candidates")
    snap = make_snapshot({"cpu": {"a": 0.8, "b": 0.2, "c": 0.5, "d": 0.2}})
    table = build_table(s, snap, frozenset(), {}, NOW)
    names = ["a", "b", "c", "unknown"]
    scores = score_candidates(s, [table.eval_of(n) for n in names])
    assert scores == [0, 10, 5, 5]
    # Over a different candidate set the same node scores differently.
    assert score_candidates(s, [table.eval_of(n) for n in ["c", "a"]]) == [10, 0]
    # All equal -> all best.
    assert score_candidates(s, [table.eval_of(n) for n in ["b", "d"]]) == [10, 10]


def test_ties_are_deterministic_and_top_hosts_keeps_request_order() -> None:
    assert to_score(0.5, 1.0) == 5 and to_score(0.45, 1.0) == 5 and to_score(0.449, 1.0) == 4
    names = ["n1", "n2", "n3", "n4"]
    assert top_hosts(names, [3, 9, 9, 1], 2) == [1, 2]
    assert top_hosts(names, [5, 5, 5, 5], 2) == [0, 1]
    assert top_hosts(names, [1, 2, 3, 4], 10) == [0, 1, 2, 3]


def test_ties_at_the_cut_are_broken_from_each_pods_start() -> None:
    names = ["n1", "n2", "n3", "n4", "n5"]
    ties = [5, 9, 5, 5, 5]
    # the best always stays; the tied ones come from `start` on, wrapping
    assert top_hosts(names, ties, 2, start=0) == [0, 1]
    assert top_hosts(names, ties, 2, start=3) == [1, 3]
    assert top_hosts(names, ties, 3, start=4) == [0, 1, 4]
    # one pod, one start (a retry gets the same answer); pods spread over the ties
    assert tie_start("uid-a", 5) == tie_start("uid-a", 5)
    starts = {tie_start(f"uid-{i}", 100) for i in range(200)}
    assert len(starts) > 80 and all(0 <= s < 100 for s in starts)
    assert tie_start("uid-a", 0) == 0


def test_herd_load_rescores_the_node_it_lands_on() -> None:
    s = cpu(filter={"above": 0.9})
    snap = make_snapshot({"cpu": {"a": 0.3, "b": 0.6}})
    base = build_table(s, snap, frozenset(), {}, NOW)
    assert base.scores["a"] == 7
    patched = patch_table(base, s, snap, {"a": 0.5}, NOW)
    assert patched.scores["a"] == 2  # 0.8 -> 2
    assert patched.scores["b"] == base.scores["b"]
    assert patched.fragments["a"] == b'{"Host":"a","Score":2}'
    heavy = patch_table(base, s, snap, {"a": 0.7}, NOW)
    assert "a" in heavy.reasons and "a" not in heavy.ok
    back = patch_table(heavy, s, snap, {}, NOW)
    assert back.scores["a"] == 7 and "a" in back.ok and "a" not in back.reasons
