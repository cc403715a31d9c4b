"""load-watcher: a 15-minute average and (population) standard deviation of the recorded
rule, fetched every minute; the plugin sees the collector's copy."""

from __future__ import annotations

import math

import pytest

from extender.simulation.peers.loadwatcher import LoadWatcher, window_stats
from extender.simulation.prometheus import MetricPipeline, Pipeline


def test_window_stats_are_avg_and_stddev_over_time_in_percent() -> None:
    history = [(0.0, 0.9, 0.5), (30.0, 0.2, 0.5), (60.0, 0.4, 0.3), (900.0, 0.6, 0.1)]
    load = window_stats(history, 900.0)  # (0, 900]: the sample at 0 is out
    assert load is not None
    assert load.cpu_avg == pytest.approx(40.0)
    assert load.cpu_std == pytest.approx(100 * math.sqrt(((0.2) ** 2 + 0 + 0.2**2) / 3))
    assert load.memory_avg == pytest.approx(30.0)
    assert window_stats(history, 2000.0) is None  # nothing inside


def test_fetch_every_minute_collect_every_thirty_seconds() -> None:
    metrics = MetricPipeline(Pipeline())
    watcher = LoadWatcher()
    seen = []
    for t in range(0, 241, 15):
        if t:
            metrics.observe("n", 0.5 if t <= 120 else 1.0, 15)
        metrics.scrape(["n"], {"n": 0.0})
        if t % 30 == 0:
            metrics.evaluate(t)
        watcher.observe(t, 1_000_000.0 + t, metrics, ["n"])
        collected = watcher.collected
        seen.append(None if collected is None else collected.window_end)
    assert seen[:5] == [1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_060]
    assert watcher.collected is not None
    assert watcher.collected.window_end == 1_000_240
    # a node seen for 4 minutes: its busy rate diluted by the 5m rule's window, so
    # load-watcher reads it below even its calmest minute (50%)
    assert watcher.collected.hosts["n"].cpu_avg < 40.0
