"""extender.decisions.peaks: a node's predicted peak, from how much more it swings than the
typical node."""

from __future__ import annotations

import pytest

from extender.decisions.peaks import MAX_MARGIN, NodePeaks


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
