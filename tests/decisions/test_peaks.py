"""extender.decisions.peaks: a node's predicted peak, from how much more it swings than the
typical node."""

from __future__ import annotations

import pytest

from extender.decisions.engine import Engine
from extender.decisions.peaks import MAX_MARGIN, NodePeaks
from tests.harness.fixtures import NOW, make_settings, make_snapshot


def follow(
    peaks: NodePeaks, series: dict[str, list[float]], step: float = 15.0
) -> dict[str, float]:
    margins: dict[str, float] = {}
    for i in range(len(next(iter(series.values())))):
        margins = peaks.observe({n: v[i] for n, v in series.items()}, 1000.0 + i * step)
    return margins


def test_a_node_that_swings_more_than_the_rest_gets_a_margin() -> None:
    steady = [0.5 + 0.01 * (i % 2) for i in range(80)]
    noisy = [0.5 + 0.3 * (i % 2) for i in range(80)]  # the same level, swinging
    peaks = NodePeaks(window=600.0, sigmas=2.0)
    margins = follow(peaks, {"a": steady, "b": steady, "c": noisy})
    assert set(margins) == {"c"}  # the median spread is a's and b's: they get none
    spread_c, spread_a = peaks.spread("c"), peaks.spread("a")
    assert spread_c is not None and spread_a is not None
    assert margins["c"] == pytest.approx(min(MAX_MARGIN, 2.0 * (spread_c - spread_a)))
    assert peaks.preview({"a": 0.5, "b": 0.5, "c": 0.5}, 3000.0).keys() <= {"c"}


def test_every_node_swinging_alike_gets_none_and_off_gets_none() -> None:
    wide = [0.5 + 0.3 * (i % 2) for i in range(40)]
    assert follow(NodePeaks(600.0, 2.0), {"a": wide, "b": wide}) == {}
    off = NodePeaks(600.0, 0.0)
    assert follow(off, {"a": wide, "c": [0.5] * 40}) == {} and not off.enabled


def test_a_node_that_leaves_is_forgotten() -> None:
    peaks = NodePeaks(600.0, 2.0)
    follow(peaks, {"a": [0.1, 0.9, 0.1], "b": [0.5, 0.5, 0.5]})
    peaks.observe({"b": 0.5}, 5000.0)
    assert peaks.spread("a") is None and peaks.spread("b") is not None


def _engine_over(values: dict[str, float]) -> tuple[Engine, float]:
    """An engine on 4-core nodes steady at `values`, followed for ten minutes of refreshes
    (every node's spread the same: no margin anywhere); and the time of the last one."""
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.85}}],
        herdGuard={"peakWindow": 600, "peakSigmas": 2},
    )
    e = Engine(settings, make_snapshot({"cpu": values}), NOW)
    t = NOW
    for i in range(40):
        t = NOW + 15 * i
        wobble = {n: v + 0.01 * (i % 2) for n, v in values.items()}
        e.install(make_snapshot({"cpu": wobble}, fetched_at=t), None, t)
    assert e.guard.ledger.margins == {}
    return e, t


def test_our_own_big_pod_is_no_swing_of_its_node() -> None:
    """A pod of ours using 40 % of node a: the herd guard counts it at once, and the metric
    shows it within a refresh or two, while the reservation is still whole (settle). The
    node's predicted value steps up by the pod and overlaps for a minute: both explained, so
    no margin follows (it would count the pod a second time, for twenty minutes)."""
    values = {"a": 0.3, "b": 0.3, "c": 0.3, "d": 0.3}
    e, t = _engine_over(values)
    assert e.reserve("big", "a", 1.6, t)
    for i in range(1, 40):
        shown = min(0.4, 0.2 * i)  # the fast rate takes the pod in over two scrapes
        now = t + 15 * i
        cpu = {**values, "a": 0.3 + shown}
        e.install(make_snapshot({"cpu": cpu}, fetched_at=now), None, now)
        assert e.guard.ledger.margins.get("a", 0.0) < 0.01, f"{i * 15} s after the bind"


def test_a_node_that_swings_while_holding_nothing_still_gets_its_margin() -> None:
    """The same step, from work no scheduler explains (no pod of ours there): a swing."""
    values = {"a": 0.3, "b": 0.3, "c": 0.3, "d": 0.3}
    e, t = _engine_over(values)
    for i in range(1, 10):
        now = t + 15 * i
        e.install(make_snapshot({"cpu": {**values, "a": 0.7}}, fetched_at=now), None, now)
    assert e.guard.ledger.margins.get("a", 0.0) > 0.1
