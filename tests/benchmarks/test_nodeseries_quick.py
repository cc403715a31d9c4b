"""tests/benchmarks/nodeseries.py runs, and counts what it says: nodes x (policies + metrics)
per-node series with explain.nodeMetrics on, none with it off."""

from __future__ import annotations

from tests.benchmarks.nodeseries import scrape


def test_the_series_are_nodes_times_policies_plus_metrics() -> None:
    on, on_bytes, _ = scrape(50, True, 1)
    off, off_bytes, _ = scrape(50, False, 1)
    assert (on, off) == (100, 0)
    assert on_bytes > off_bytes
