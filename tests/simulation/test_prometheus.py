"""The metric lag: a step in a node's CPU reaches our refresher only after a scrape, a rule
evaluation and a refresh, and is fully shown only once the rate window has passed; the raw
fast rate shows a rise within a minute, and the larger of the two falls slowly."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from extender.simulation.prometheus import MetricPipeline, Pipeline, extrapolated_share

STEP_AT = 600


def seen_by_refresher(
    pipeline: Pipeline,
    utilisation: Callable[[int], float],
    until: int,
    read: Callable[[MetricPipeline, int], dict[str, float]] | None = None,
) -> dict[int, float]:
    """refresh time -> what our refresher read for node "n" (NaN: no value yet), driving
    the pipeline the way run.Run does at every tick boundary; `read` picks the answer
    (the recorded rule by default)."""
    metrics = MetricPipeline(pipeline)
    tick = pipeline.tick
    seen: dict[int, float] = {}
    for t in range(0, until + 1, tick):
        if t > 0:
            metrics.observe("n", utilisation(t - tick), tick)  # the tick just ended
        if t % pipeline.scrape_interval == 0:
            metrics.scrape(["n"])
        if t % pipeline.rule_interval == 0:
            metrics.evaluate(t)
        if t % pipeline.refresh_interval == 0:
            answer = dict(metrics.query()) if read is None else read(metrics, t)
            seen[t] = answer.get("n", math.nan)
    return seen


def step(t: int) -> float:
    return 0.2 if t < STEP_AT else 0.8


def test_a_step_shows_after_scrape_rule_and_refresh_and_fully_after_the_window() -> None:
    seen = seen_by_refresher(Pipeline(), step, 1200)
    assert seen[STEP_AT] == pytest.approx(0.2)
    assert seen[STEP_AT + 15] == pytest.approx(0.2)  # sampled at 615, not yet evaluated
    # The rule at 630 (every 30 s) holds the two intervals after the step among its 19.
    assert seen[STEP_AT + 30] == pytest.approx((17 * 0.2 + 2 * 0.8) / 19)
    assert seen[STEP_AT + 270] < 0.8 - 1e-9  # the window still reaches before the step
    assert seen[STEP_AT + 300] == pytest.approx(0.8)  # 5 minutes: fully shown
    values = [v for t, v in sorted(seen.items()) if t >= STEP_AT]
    assert values == sorted(values)  # it only climbs


def test_a_slower_refresher_adds_its_own_delay() -> None:
    seen = seen_by_refresher(Pipeline(refresh_interval=60), step, 1200)
    assert seen[STEP_AT] == pytest.approx(0.2)
    assert seen[STEP_AT + 60] > 0.2 + 1e-9  # the first refresh after the 630 evaluation


def test_a_shorter_window_follows_sooner() -> None:
    seen = seen_by_refresher(Pipeline(rate_window=60, rule_interval=15), step, 900)
    assert seen[STEP_AT + 15] == pytest.approx((2 * 0.2 + 0.8) / 3)
    assert seen[STEP_AT + 45] == pytest.approx(0.8)


def test_a_new_node_looks_busy_until_its_series_covers_the_window() -> None:
    """PromQL's rate() divides by the whole window: a node seen for 15 s shows its idle
    rate at (15 + 7.5) / 300 of itself, so 1 - idle reads near 100 %."""
    metrics = MetricPipeline(Pipeline())
    metrics.scrape(["n"])
    metrics.evaluate(0)
    assert "n" not in metrics.query()
    metrics.observe("n", 0.5, 15)
    metrics.observe("other", 0.5, 15)  # never scraped: nothing to measure from
    metrics.scrape(["n"])
    metrics.evaluate(15)
    assert metrics.query() == {"n": pytest.approx(1 - 0.5 * 22.5 / 300)}
    assert metrics.evaluated_at == 15
    assert metrics.history("n")[-1][1] == pytest.approx(0.5 * 22.5 / 300)  # busy rate: idle
    assert metrics.fast(15) == {"n": pytest.approx(1 - 0.5 * 22.5 / 60)}
    for _ in range(30, 271, 15):
        metrics.observe("n", 0.5, 15)
        metrics.scrape(["n"])
    metrics.evaluate(270)
    assert metrics.query() == {"n": pytest.approx(1 - 0.5 * (270 + 7.5) / 300)}
    metrics.observe("n", 0.5, 15)
    metrics.scrape(["n"])
    metrics.evaluate(285)  # its first sample 15 s inside the window: extrapolated to it
    assert metrics.query() == {"n": pytest.approx(0.5)}


@pytest.mark.parametrize(
    ("first", "last", "at", "samples", "zero", "want"),
    [
        (15, 300, 300, 20, None, 1.0),  # a whole window: the first gap (15 s) counts
        (45, 300, 300, 18, None, (255 + 7.5) / 300),  # began inside: half an interval
        (105, 120, 120, 2, 100.0, (15 + 5) / 300),  # a counter from 0 at 100: no further
        (300, 585, 590, 20, None, (285 + 10 + 5) / 300),  # gaps under 1.1 intervals
        (300, 540, 590, 17, None, (240 + 10 + 7.5) / 300),  # a late end: half an interval
    ],
)
def test_extrapolated_share_is_promqls(
    first: float, last: float, at: float, samples: int, zero: float | None, want: float
) -> None:
    assert extrapolated_share(first, last, at, 300, samples, zero) == pytest.approx(want)


def test_the_pipeline_steps_on_the_gcd_and_refuses_nonsense() -> None:
    assert Pipeline().tick == 15
    assert Pipeline(scrape_interval=10, rule_interval=30, refresh_interval=15).tick == 5
    with pytest.raises(ValueError):
        Pipeline(rate_window=20)  # fewer than two scrapes
    with pytest.raises(ValueError):
        Pipeline(refresh_interval=0)
    with pytest.raises(ValueError, match="fast_window"):
        Pipeline(fast_window=20)
    with pytest.raises(ValueError, match="history_window"):
        Pipeline(history_window=10)


def test_the_metric_rises_within_a_minute_through_the_raw_rate() -> None:
    seen = seen_by_refresher(Pipeline(), step, 1200, lambda m, t: m.metric(t))
    assert seen[STEP_AT] == pytest.approx(0.2)
    assert seen[STEP_AT + 15] == pytest.approx((2 * 0.2 + 0.8) / 3)  # the raw 1m rate
    assert seen[STEP_AT + 45] == pytest.approx(0.8)  # the rule alone would still say ~0.3
    rule = seen_by_refresher(Pipeline(), step, 1200)
    assert rule[STEP_AT + 45] < 0.4


def down(t: int) -> float:
    return 0.8 if t < STEP_AT else 0.2


def test_the_metric_falls_slowly_with_the_rule() -> None:
    seen = seen_by_refresher(Pipeline(), down, 1200, lambda m, t: m.metric(t))
    fast = seen_by_refresher(Pipeline(), down, 1200, lambda m, t: m.fast(t))
    assert fast[STEP_AT + 45] == pytest.approx(0.2)
    assert seen[STEP_AT + 45] > 0.7  # the larger: the 5-minute rule still remembers
    assert seen[STEP_AT + 300] == pytest.approx(0.2)


def test_without_a_fast_window_the_metric_is_the_rule() -> None:
    off = Pipeline(fast_window=0)
    assert seen_by_refresher(off, step, 900, lambda m, t: m.metric(t)) == seen_by_refresher(
        off, step, 900
    )


def test_the_rule_keeps_fifteen_minutes_of_answers_with_memory() -> None:
    metrics = MetricPipeline(Pipeline())
    for t in range(0, 1800 + 1, 15):
        if t:
            metrics.observe("n", 0.5, 15)
        metrics.scrape(["n"], {"n": t / 10_000})
        if t % 30 == 0:
            metrics.evaluate(t)
    history = metrics.history("n")
    assert len(history) == 30  # 900 s of evaluations every 30 s
    assert history[0][0] == 1800 - 870 and history[-1] == (1800, 0.5, 0.18)
    assert metrics.history("unknown") == ()


def test_nodes_there_before_the_run_are_not_diluted() -> None:
    metrics = MetricPipeline(Pipeline())
    metrics.known(["old"])
    for t in range(0, 31, 15):
        if t:
            metrics.observe("old", 0.5, 15)
            metrics.observe("new", 0.5, 15)
        metrics.scrape(["old", "new"])
    metrics.evaluate(30)
    assert metrics.query()["old"] == pytest.approx(0.5)
    assert metrics.query()["new"] == pytest.approx(1 - 0.5 * 37.5 / 300)
