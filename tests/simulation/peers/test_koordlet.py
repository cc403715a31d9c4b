"""The koordlet's NodeMetric: node and pods averaged over the last 300 s, every minute."""

from __future__ import annotations

import pytest

from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.peers.koordlet import EMPTY, Koordlets, report
from extender.simulation.workload import GIB, NodeSpec, PodSpec

NODE = NodeSpec("n", 8, 32 * GIB)
POD = PodSpec("p", 500, 2 * GIB, 1.0, 0.0, 3600.0)


def setup(ticks: int, demand: float) -> tuple[NodeLedger, PodMeter]:
    record = NodeLedger(15.0)
    for k in range(ticks):
        record.record(k, "n", demand, 0.25)
    return record, PodMeter(record, 15, 300)


def test_a_report_averages_the_last_five_minutes() -> None:
    record, meter = setup(20, 0.25)
    for k in range(20, 40):
        record.record(k, "n", 0.75, 0.25)
    meter.started(POD, "n", 540.0)
    metric = report(NODE, 600.0, 1_000_600.0, record, meter)
    assert metric.update_time == 1_000_600.0
    assert metric.cpu_milli == 6000  # ticks 20..39: 75% of 8 cores
    assert metric.memory == 8 * GIB
    assert metric.pods == {"p": (1000, 2 * GIB)}  # its own 60 s of samples


def test_the_koordlets_report_every_minute_and_a_new_node_has_no_update_time() -> None:
    record, meter = setup(8, 0.5)
    koordlets = Koordlets()
    assert koordlets.observe(90.0, 1_000_090.0, {"n": NODE}, record, meter)  # joined
    assert koordlets.metrics["n"] is EMPTY and EMPTY.update_time is None
    assert not koordlets.observe(105.0, 1_000_105.0, {"n": NODE}, record, meter)
    assert koordlets.observe(120.0, 1_000_120.0, {"n": NODE}, record, meter)
    assert koordlets.metrics["n"].cpu_milli == pytest.approx(4000)
