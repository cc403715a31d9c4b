"""The record agents read: a node's means over any span of ticks, and what a pod's own CPU
series shows (its use after two scrapes; less when its node is short of CPU)."""

from __future__ import annotations

import pytest

from extender.simulation.ledger import NodeLedger, PodMeter, Running
from extender.simulation.workload import GIB, PodSpec

POD = PodSpec("p", 500, GIB, 1.5, 0.0, 600.0, "web", "h")


def ledger(demands: list[float], first: int = 0) -> NodeLedger:
    out = NodeLedger(15.0)
    for k, d in enumerate(demands, first):
        out.record(k, "n", d, 0.25)
    return out


def test_means_over_spans_of_ticks_clipped_to_what_was_recorded() -> None:
    record = ledger([0.2, 0.4, 1.6, 0.8], first=10)
    assert record.cpu("n", 10, 12) == pytest.approx(0.3)
    assert record.cpu("n", 12, 13) == pytest.approx(1.0)  # capped
    assert record.served("n", 12, 13) == pytest.approx(1 / 1.6)  # served in proportion
    assert record.served("n", 10, 12) == pytest.approx(1.0)
    assert record.memory("n", 0, 100) == pytest.approx(0.25)  # clipped to ticks 10..13
    assert record.cpu("n", 0, 10) is None  # before it joined
    assert record.cpu("other", 0, 100) is None


def test_a_pod_series_irate_shows_its_use_at_two_scrapes_its_rate_after_the_window() -> None:
    meter = PodMeter(ledger([0.5] * 40), scrape_interval=15, window=300)
    entry = Running(POD, "n", 100.0)  # started mid-interval; first sample at 105
    assert meter.rate(entry, 105.0) is None and meter.irate(entry, 105.0) is None
    assert meter.irate(entry, 120.0) == pytest.approx(1.5)  # samples at 105 and 120
    assert meter.rate(entry, 120.0) == pytest.approx(1.5 * (15 + 5) / 300)  # from 0 at 100
    assert meter.rate(entry, 590.0) == pytest.approx(1.5)  # its series covers the window


def test_a_pod_on_a_node_short_of_cpu_shows_its_share() -> None:
    meter = PodMeter(ledger([2.0] * 40), scrape_interval=15, window=300)
    entry = Running(POD, "n", 0.0)
    assert meter.rate(entry, 300.0) == pytest.approx(0.75)  # half of the node's demand served


def test_koordlet_averages_a_pod_over_the_samples_it_has() -> None:
    meter = PodMeter(ledger([0.5] * 20 + [2.0] * 20), scrape_interval=15, window=300)
    entry = Running(POD, "n", 540.0)
    assert meter.average(entry, 540.0, 300.0) is None  # no sample yet
    assert meter.average(entry, 600.0, 300.0) == pytest.approx(0.75)  # all in the busy ticks
    assert meter.average(Running(POD, "n", 0.0), 300.0, 300.0) == pytest.approx(1.5)
    assert meter.average(Running(POD, "n", 0.0), 450.0, 300.0) == pytest.approx(1.125)  # half


def test_the_meter_tracks_pods_by_node() -> None:
    meter = PodMeter(NodeLedger(15.0), 15, 300)
    meter.started(POD, "n", 3.0)
    assert list(meter.on_node["n"]) == ["p"] and meter.running["p"].start == 3.0
    meter.stopped(POD)
    meter.stopped(POD)  # twice is harmless
    assert meter.on_node["n"] == {} and meter.running == {}
