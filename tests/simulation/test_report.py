"""The report: spreads over seeds, the table with every scheduler, the JSON document (with
the old `baseline`/`ours` names kept), and the targets' verdicts."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from extender.simulation.experiment import Plan, Runs
from extender.simulation.profiles import DECICE, KOORDINATOR, KUBE_SCHEDULER, LVRB, TLP
from extender.simulation.report import ROWS, build_report, render, to_json
from extender.simulation.run import RunResult
from extender.simulation.stats import Metrics, PeakCalibration, Recorder, percentile, pstdev
from extender.simulation.summary import spread
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


def runs(
    base: list[float], ours: list[float], p95: float = 0.0, peers: float | None = None
) -> list[Runs]:
    """kube-scheduler and decice with these hot node-minutes per seed; with `peers`, the
    three peers each at that many."""
    out = []
    for seed, (b, o) in enumerate(zip(base, ours, strict=True), 1):
        results = {
            KUBE_SCHEDULER: result(replace(BASE, node_minutes_hot=b), seed),
            DECICE: result(replace(BASE, node_minutes_hot=o, cpu_p95=BASE.cpu_p95 + p95), seed),
        }
        if peers is not None:
            for name in (TLP, LVRB, KOORDINATOR):
                results[name] = result(replace(BASE, node_minutes_hot=peers), seed)
        out.append(Runs(seed, results))
    return out


def verdicts(results: dict[str, list[Runs]]) -> dict[str, bool | None]:
    plan = Plan(scenarios=tuple(results), seeds=(1, 2, 3))
    report = build_report(plan, "policy.yaml", results, {})
    return {v.target: v.met for v in report.verdicts}


def test_spread_is_mean_sample_sd_and_range() -> None:
    s = spread([1.0, 2.0, 3.0])
    assert (s.mean, s.sd, s.low, s.high, s.values) == (2.0, 1.0, 1.0, 3.0, (1.0, 2.0, 3.0))
    assert spread([4.0]).sd == 0.0


def test_percentile_and_pstdev() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0 and percentile([], 95) == 0.0
    assert pstdev([1.0, 3.0]) == 1.0


def test_the_waits_are_minutes_of_the_pods_that_waited() -> None:
    recorder = Recorder(start=0.0, tick=15.0)
    none = recorder.metrics(unplaced=0, pods=10)
    assert (none.wait_p95, none.wait_max, none.wait_minutes) == (0.0, 0.0, 0.0)
    waits = [60.0 * m for m in range(1, 21)]  # 1..20 minutes
    for w in waits:
        recorder.waited(100.0, 100.0 + w)
    some = recorder.metrics(unplaced=0, pods=30)
    assert some.wait_p95 == pytest.approx(percentile(waits, 95) / 60) == pytest.approx(19.05)
    assert some.wait_max == 20.0
    assert some.wait_minutes == pytest.approx(sum(range(1, 21)))


def test_pod_wait_minutes_count_the_measured_window_and_the_pods_never_placed() -> None:
    recorder = Recorder(start=600.0, tick=15.0)
    recorder.waited(0.0, 900.0)  # 15 minutes, 5 of them in the measured window
    recorder.waited(0.0, 300.0)  # placed before the window: costs nothing there
    recorder.waited(1200.0, 3000.0, placed=False)  # never placed: waited until the end
    m = recorder.metrics(unplaced=1, pods=3)
    assert m.wait_minutes == pytest.approx(5 + 30)
    assert m.waited == 2 and m.wait_max == 15.0  # the unplaced one is not "placed after"


def test_exceedance_is_the_share_of_placements_whose_node_went_hot_within_5_minutes() -> None:
    recorder = Recorder(start=0.0, tick=15.0)
    recorder.placed(0.0, 0.5, "a")  # a goes hot 4 minutes later: exceeded
    recorder.placed(0.0, 0.5, "b")  # b goes hot 6 minutes later: not within the window
    recorder.placed(0.0, 0.95, "c")  # placed onto a hot node: exceeded at once
    recorder.placed(0.0, 0.5, "d")  # never hot
    for t in range(0, 601, 15):
        cpu = [0.95 if t == 240 else 0.5, 0.95 if t == 360 else 0.5, 0.95, 0.5]
        recorder.record(float(t), cpu, cpu, ["a", "b", "c", "d"])
    m = recorder.metrics(unplaced=0, pods=4)
    assert m.exceedance == pytest.approx(2 / 4)
    assert m.placed_on_hot == 1


def test_halving_is_judged_on_the_means_in_every_scenario_but_uniform() -> None:
    got = verdicts(
        {"skewed": runs([100, 120, 80], [40, 50, 30]), "burst": runs([100] * 3, [60] * 3)}
    )
    assert got["skewed: at least 50% fewer node-minutes above 90% CPU than kube-scheduler"]
    assert not got["burst: at least 50% fewer node-minutes above 90% CPU than kube-scheduler"]
    assert got["uniform: no worse"] is None  # not run


def test_ours_must_have_no_more_than_any_peer() -> None:
    target = "skewed: no more node-minutes above 90% CPU than any peer"
    assert verdicts({"skewed": runs([100] * 3, [40] * 3, peers=40)})[target] is True
    assert verdicts({"skewed": runs([100] * 3, [40] * 3, peers=39)})[target] is False
    assert verdicts({"skewed": runs([100] * 3, [40] * 3)})[target] is None  # no peer run


def test_a_peer_ahead_by_leaving_pods_unplaced_is_named_with_them() -> None:
    results = runs([100] * 3, [40] * 3, peers=39)
    for r in results:  # Koordinator's lead: 2 pods kube-scheduler placed, per seed
        left = frozenset({f"a{r.seed}", f"b{r.seed}"})
        r.results[KOORDINATOR] = replace(r[KOORDINATOR], unplaced=left)  # type: ignore[index]
    report = build_report(
        Plan(scenarios=("skewed",), seeds=(1, 2, 3)), "p", {"skewed": results}, {}
    )
    (hot,) = [v for v in report.verdicts if v.target.startswith("skewed: no more node-minutes")]
    assert hot.met is False
    assert (
        "fewer: trimaran-tlp, trimaran-lvrb, koordinator, which left 6 pods unplaced" in hot.detail
    )


def test_uniform_is_no_worse_within_noise() -> None:
    target = "uniform: no worse than kube-scheduler alone within noise"
    assert verdicts({"uniform": runs([100, 100, 100], [90, 112, 95])})[target] is True
    assert verdicts({"uniform": runs([100, 100, 100], [120, 121, 119])})[target] is False
    worse_p95 = runs([100, 100, 100], [90, 90, 90], p95=0.05)
    assert verdicts({"uniform": worse_p95})[target] is False


def test_a_pod_only_ours_left_unplaced_misses_the_target() -> None:
    left = [
        Runs(
            1,
            {
                KUBE_SCHEDULER: result(BASE, 1),
                DECICE: result(replace(BASE, unplaced=1), 1, frozenset({"p"})),
            },
        )
    ]
    report = build_report(Plan(scenarios=("burst",)), "p", {"burst": left}, {})
    (verdict,) = [v for v in report.verdicts if "unplaced" in v.target]
    assert verdict.met is False and "burst 1" in verdict.detail
    assert judge([])[-1].met is True
    assert "pods kube-scheduler placed and another left unplaced: decice 1" in render(report)


def test_render_and_json_carry_every_scheduler_metric_and_the_targets() -> None:
    results = {"skewed": runs([100, 120, 80], [40, 50, 30], peers=60)}
    report = build_report(
        Plan(scenarios=("skewed",), seeds=(1, 2, 3)), "p.yaml", results, {"skewed": "busy"}
    )
    text = render(report)
    assert "skewed: busy (1000 pods; as drawn for seed 1)" in text
    for _, label, _ in ROWS:
        assert label in text
    for heading in ("kube-scheduler", "decice", "trimaran-tlp", "trimaran-lvrb", "koordinator"):
        assert heading in text
    assert "100 ± 20" in text and "40 ± 10  -60%" in text and "60 ± 0  -40%" in text
    assert "MET    skewed: no more" in text and "n/a" in text
    doc = orjson.loads(orjson.dumps(to_json(report)))
    assert set(doc) == {"plan", "distribution", "scenarios", "targets"}
    skewed = doc["scenarios"]["skewed"]
    assert list(skewed["schedulers"]) == [KUBE_SCHEDULER, DECICE, TLP, LVRB, KOORDINATOR]
    assert skewed["schedulers"][KUBE_SCHEDULER]["node_minutes_hot"]["values"] == [100, 120, 80]
    assert skewed["baseline"] == skewed["schedulers"][KUBE_SCHEDULER]  # the old names, kept
    assert skewed["ours"]["node_minutes_hot"]["mean"] == pytest.approx(40)
    assert skewed["unplacedOnly"] == {DECICE: 0, TLP: 0, LVRB: 0, KOORDINATOR: 0}
    assert skewed["unplacedOnlyOurs"] == 0 and skewed["overcommitted"] == 0
    assert doc["plan"]["pipeline"]["tick"] == 15 and doc["plan"]["seeds"] == [1, 2, 3]
    assert doc["plan"]["schedulers"][0] == KUBE_SCHEDULER
    assert {t["met"] for t in doc["targets"]} == {True, None}


def test_ours_must_wait_no_longer_than_a_peer_that_waits_for_load() -> None:
    """Fewer hot node-minutes bought with longer waits does not count: ours is judged
    against Koordinator's pod-wait minutes (its filter turns pods away for load)."""
    target = "skewed: no more pod-wait minutes than any peer that waits for load"

    def waited(ours: float, koordinator: float) -> list[Runs]:
        out = runs([100] * 3, [40] * 3, peers=50)
        for r in out:
            results = dict(r.results)
            results[DECICE] = replace(
                results[DECICE], metrics=replace(results[DECICE].metrics, wait_minutes=ours)
            )
            k = results[KOORDINATOR]
            results[KOORDINATOR] = replace(k, metrics=replace(k.metrics, wait_minutes=koordinator))
            out[out.index(r)] = Runs(r.seed, results)
        return out

    assert verdicts({"skewed": waited(100.0, 100.0)})[target] is True
    assert verdicts({"skewed": waited(101.0, 100.0)})[target] is False
    assert verdicts({"skewed": runs([100] * 3, [40] * 3)})[target] is None  # no peer run


def test_a_peak_predictor_is_judged_by_how_often_it_is_exceeded_later() -> None:
    """A (mean, sd) predicted at t is checked 5 minutes on: node a at 0.5 +- 0.1 is seen
    at 0.65 (over 1 sd, under 2), b at 0.5 +- 0.1 at 0.95 (over all three); a node with
    no spread is not judged, and nothing predicted reads -1."""
    calibration = PeakCalibration()
    assert calibration.shares() == (-1.0, -1.0, -1.0)
    calibration.predicted(0.0, {"a": (0.5, 0.1), "b": (0.5, 0.1), "c": (0.5, 0.0)})
    calibration.observe(285.0, ["a", "b", "c"], [0.99, 0.99, 0.99])  # not due yet
    calibration.observe(300.0, ["a", "b", "c"], [0.65, 0.95, 0.99])
    assert calibration.shares() == pytest.approx((1.0, 0.5, 0.5))


def test_a_node_given_a_pod_after_its_prediction_is_not_judged() -> None:
    """The prediction is of the node's load, not of pods placed on it later (the herd guard
    counts those): b took a pod 60 s after the prediction, so only a is judged; a pod
    placed before the prediction does not exempt a node."""
    calibration = PeakCalibration()
    calibration.placed("a", 0.0)
    calibration.predicted(0.0, {"a": (0.5, 0.1), "b": (0.5, 0.1)})
    calibration.placed("b", 60.0)
    calibration.observe(300.0, ["a", "b"], [0.65, 0.95])
    assert calibration.shares() == pytest.approx((1.0, 0.0, 0.0))
