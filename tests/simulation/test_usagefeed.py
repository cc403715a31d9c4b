"""The measured use fed to our engine: a workload's quantile over its running pods' series,
with the count measured, and young pods' own use; pods without two samples are not yet
measured."""

from __future__ import annotations

import pytest

from extender.decisions.usage import WorkloadKey
from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.usagefeed import YOUNG_POD, usage_table
from extender.simulation.workload import GIB, PodSpec


def pod(uid: str, use: float, workload: str = "web", arrival: float = 0.0) -> PodSpec:
    return PodSpec(uid, 100, GIB, use, arrival, 3600.0, workload, "h" if workload else "")


def test_a_workload_is_its_pods_quantile_and_count() -> None:
    record = NodeLedger(15.0)
    for k in range(200):
        record.record(k, "n", 0.5, 0.0)
    meter = PodMeter(record, 15, 300)
    for i, use in enumerate([0.1, 0.2, 0.3, 0.4, 1.0]):
        meter.started(pod(f"w{i}", use), "n", 0.0)
    meter.started(pod("bare", 0.7, workload=""), "n", 0.0)
    meter.started(pod("late", 5.0, arrival=1400.0), "n", 1490.0)  # one sample by 1500
    table = usage_table(meter, 1500.0, 0.9, 1_000_000.0)
    web = table.workloads[WorkloadKey("sim", "deployment", "web")]
    assert web.pods == 5
    assert web.cores == pytest.approx(0.4 + 0.6 * 0.6)  # PromQL's quantile: rank 3.6
    assert table.fetched_at == 1_000_000.0
    assert len(table.workloads) == 1  # a bare pod belongs to no workload
    assert ("sim", "late") not in table.pods  # young, but not measured yet


def test_only_young_pods_report_their_own_use() -> None:
    record = NodeLedger(15.0)
    for k in range(200):
        record.record(k, "n", 0.5, 0.0)
    meter = PodMeter(record, 15, 300)
    meter.started(pod("old", 0.3, arrival=0.0), "n", 0.0)
    meter.started(pod("young", 0.6, arrival=2000.0), "n", 2000.0)
    table = usage_table(meter, 2000.0 + 300, 0.9, 0.0)
    assert set(table.pods) == {("sim", "young")}  # "old" was created YOUNG_POD s ago or more
    assert table.pods[("sim", "young")] == pytest.approx(0.6)
    assert YOUNG_POD <= 2300
