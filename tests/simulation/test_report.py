"""The report: spreads over seeds, the table, the JSON document, and the targets' verdicts."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from extender.simulation.experiment import Pair, Plan
from extender.simulation.report import ROWS, build_report, render, spread, to_json
from extender.simulation.run import RunResult
from extender.simulation.stats import Metrics, percentile, pstdev
from extender.simulation.targets import judge

BASE = Metrics(
    node_minutes_hot=100.0,
    cpu_p95=0.9,
    cpu_max=1.0,
    demand_p95=0.95,
    demand_max=1.4,
    cpu_std=0.15,
    placed_on_hot=10,
    unplaced=0,
    pods=1000,
    waited=0,
)


def result(metrics: Metrics, seed: int, unplaced: frozenset[str] = frozenset()) -> RunResult:
    return RunResult("s", seed, "x", metrics, (), {}, unplaced, 0)


def pairs(base: list[float], ours: list[float], p95: float = 0.0) -> list[Pair]:
    return [
        Pair(
            result(replace(BASE, node_minutes_hot=b), seed),
            result(replace(BASE, node_minutes_hot=o, cpu_p95=BASE.cpu_p95 + p95), seed),
        )
        for seed, (b, o) in enumerate(zip(base, ours, strict=True), 1)
    ]


def verdicts(results: dict[str, list[Pair]]) -> dict[str, bool | None]:
    plan = Plan(scenarios=tuple(results), seeds=(1, 2, 3))
    report = build_report(plan, "policy.yaml", results, {})
    return {v.target.split(":")[0]: v.met for v in report.verdicts}


def test_spread_is_mean_sample_sd_and_range() -> None:
    s = spread([1.0, 2.0, 3.0])
    assert (s.mean, s.sd, s.low, s.high, s.values) == (2.0, 1.0, 1.0, 3.0, (1.0, 2.0, 3.0))
    assert spread([4.0]).sd == 0.0


def test_percentile_and_pstdev() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0 and percentile([], 95) == 0.0
    assert pstdev([1.0, 3.0]) == 1.0


def test_halving_is_judged_on_the_means() -> None:
    got = verdicts(
        {
            "skewed": pairs([100, 120, 80], [40, 50, 30]),
            "hot-node": pairs([100, 100, 100], [60, 60, 60]),
        }
    )
    assert got["skewed"] is True
    assert got["hot-node"] is False
    assert got["uniform"] is None  # not run


def test_uniform_is_no_worse_within_noise() -> None:
    assert verdicts({"uniform": pairs([100, 100, 100], [90, 112, 95])})["uniform"] is True
    assert verdicts({"uniform": pairs([100, 100, 100], [120, 121, 119])})["uniform"] is False
    worse_p95 = pairs([100, 100, 100], [90, 90, 90], p95=0.05)
    assert verdicts({"uniform": worse_p95})["uniform"] is False


def test_a_pod_only_ours_left_unplaced_misses_the_target() -> None:
    left = [Pair(result(BASE, 1), result(replace(BASE, unplaced=1), 1, frozenset({"p"})))]
    report = build_report(Plan(scenarios=("burst",)), "p", {"burst": left}, {})
    (verdict,) = [v for v in report.verdicts if "unplaced" in v.target]
    assert verdict.met is False and "burst 1" in verdict.detail
    assert judge([])[-1].met is True


def test_render_and_json_carry_every_metric_and_the_targets() -> None:
    results = {"skewed": pairs([100, 120, 80], [40, 50, 30])}
    report = build_report(
        Plan(scenarios=("skewed",), seeds=(1, 2, 3)), "p.yaml", results, {"skewed": "busy"}
    )
    text = render(report)
    assert "skewed: busy (1000 pods; as drawn for seed 1)" in text
    for _, label, _ in ROWS:
        assert label in text
    assert "100 ± 20" in text and "40 ± 10" in text and "-60%" in text
    assert "MET    skewed" in text and "n/a" in text
    doc = orjson.loads(orjson.dumps(to_json(report)))
    assert set(doc) == {"plan", "distribution", "scenarios", "targets"}
    skewed = doc["scenarios"]["skewed"]
    assert skewed["baseline"]["node_minutes_hot"]["values"] == [100, 120, 80]
    assert skewed["ours"]["node_minutes_hot"]["mean"] == pytest.approx(40)
    assert skewed["unplacedOnlyOurs"] == 0 and skewed["overcommitted"] == 0
    assert doc["plan"]["pipeline"]["tick"] == 15 and doc["plan"]["seeds"] == [1, 2, 3]
    assert {t["met"] for t in doc["targets"]} == {True, None}
