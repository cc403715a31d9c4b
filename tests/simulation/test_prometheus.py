"""The metric lag: a step in a node's CPU reaches our refresher only after a scrape, a rule
evaluation and a refresh, and is fully shown only once the rate window has passed."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from extender.simulation.prometheus import MetricPipeline, Pipeline

STEP_AT = 600


def seen_by_refresher(
    pipeline: Pipeline, utilisation: Callable[[int], float], until: int
) -> dict[int, float]:
    """refresh time -> what our refresher read for node "n" (NaN: no value yet), driving
    the pipeline the way run.Run does at every tick boundary."""
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
            seen[t] = metrics.query().get("n", math.nan)
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


def test_a_node_has_no_value_before_its_second_scrape() -> None:
    metrics = MetricPipeline(Pipeline())
    metrics.scrape(["n"])
    metrics.evaluate(0)
    assert "n" not in metrics.query()
    metrics.observe("n", 0.5, 15)
    metrics.observe("other", 0.5, 15)  # never scraped: nothing to measure from
    metrics.scrape(["n"])
    metrics.evaluate(15)
    assert metrics.query() == {"n": pytest.approx(0.5)}
    assert metrics.evaluated_at == 15


def test_the_pipeline_steps_on_the_gcd_and_refuses_nonsense() -> None:
    assert Pipeline().tick == 15
    assert Pipeline(scrape_interval=10, rule_interval=30, refresh_interval=15).tick == 5
    assert Pipeline().intervals_in_window == 19
    with pytest.raises(ValueError):
        Pipeline(rate_window=20)  # fewer than two scrapes
    with pytest.raises(ValueError):
        Pipeline(refresh_interval=0)
