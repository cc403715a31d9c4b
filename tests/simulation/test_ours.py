"""Our extender in the simulation answers what the service answers: the shipped policy,
the real engine, the wire format; it is sent pods as their ReplicaSet made them and fed
what the refresher would fetch: a workload's quantile over its running pods' series, with
the count measured, and young pods' own use; pods without two samples are not yet measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse, workload_of
from extender.policy.loading import load_settings
from extender.policy.settings import Settings
from extender.simulation.experiment import with_max_hosts
from extender.simulation.framework import Feeds
from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.ours import YOUNG_POD, OurExtender, pod_document, usage_table
from extender.simulation.prometheus import MetricPipeline, Pipeline
from extender.simulation.workload import GIB, NodeSpec, PodSpec

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
NOW = 1_000_000.0
POD = PodSpec("p-1", 2000, GIB, 2.0, 0.0, 60.0, "web", "5d8f7c9b6d")
NODES = ["a", "b", "c"]
CORES = {"a": 8.0, "b": 8.0, "c": 8.0}


@pytest.fixture(scope="module")
def shipped() -> Settings:
    return load_settings(SHIPPED)


def extender(settings: Settings) -> OurExtender:
    ours = OurExtender(settings, NOW)
    ours.install({"a": 0.2, "b": 0.95, "c": 0.5}, CORES, NOW)
    return ours


def test_filter_drops_the_node_above_the_shipped_threshold(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.filters
    assert ours.filter(POD, NODES, NOW) == ["a", "c"]


def test_prioritize_scores_lower_cpu_higher(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.prioritize(POD, ["a", "c"], NOW) == {"a": 8, "c": 5}


def test_a_bind_reserves_on_the_herd_guard_and_a_departure_frees_it(shipped: Settings) -> None:
    ours = extender(shipped)
    ours.filter(POD, NODES, NOW)  # the engine learns of the pod as the scheduler asks
    ours.bound(POD, "a", NOW)
    assert ours.engine.herd() == {"a": pytest.approx(2.0 / 8)}  # nothing measured: its request
    assert ours.prioritize(POD, ["a", "c"], NOW + 1)["a"] == 6  # 0.2 + 0.25 counted
    assert ours.engine.pods.get(POD.uid) is not None
    ours.released(POD, "a", NOW + 2)
    assert ours.engine.herd() == {}


def test_the_reservation_is_gone_once_the_metric_shows_the_pod(shipped: Settings) -> None:
    ours = extender(shipped)
    ours.bound(POD, "a", NOW)
    ours.install({"a": 0.2, "b": 0.95, "c": 0.5}, CORES, NOW + 1)
    assert ours.engine.herd() != {}
    ours.install({"a": 0.45, "b": 0.95, "c": 0.5}, CORES, NOW + 3600)
    assert ours.engine.reservations == {}
    assert set(ours.engine.herd()) <= {"a"}  # a moved: what is left is its spread's margin


def test_max_hosts_keeps_the_best_k(shipped: Settings) -> None:
    ours = extender(with_max_hosts(shipped, 1))
    assert ours.prioritize(POD, ["a", "c"], NOW) == {"a": 8}
    every = extender(with_max_hosts(shipped, 0))
    assert every.prioritize(POD, ["a", "c"], NOW) == {"a": 8, "c": 5}


def test_a_node_without_data_is_neutral_under_fail_open(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.filter(POD, ["a", "new"], NOW) == ["a", "new"]
    assert ours.prioritize(POD, ["a", "new"], NOW)["new"] == 5


def test_the_pod_names_its_deployment_the_way_the_engine_reads_it() -> None:
    doc = pod_document(POD, "decice_sched")
    meta = doc["metadata"]
    assert meta["ownerReferences"][0]["name"] == "web-5d8f7c9b6d"
    assert meta["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert workload_of(meta["namespace"], meta["ownerReferences"], meta["labels"]) == (
        WorkloadKey("sim", "deployment", "web")
    )
    bare = pod_document(PodSpec("b", 100, GIB, 0.1, 0.0, 60.0), "decice_sched")
    assert "ownerReferences" not in bare["metadata"]
    assert "limits" not in bare["spec"]["containers"][0]["resources"]
    capped = PodSpec("c", 100, GIB, 0.1, 0.0, 60.0, cpu_limit_milli=400)
    limits = pod_document(capped, "s")["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "400m"}


def test_install_hands_the_measured_use_to_the_engine(shipped: Settings) -> None:
    ours = OurExtender(shipped, NOW)
    table = UsageTable({WorkloadKey("sim", "deployment", "web"): WorkloadUse(0.9, 12)}, {}, NOW)
    ours.install({"a": 0.2}, CORES, NOW, table)
    assert ours.engine.snapshot.usage is table


def test_each_refresh_installs_the_metric_and_the_pods_use(shipped: Settings) -> None:
    pipeline = Pipeline()
    metrics = MetricPipeline(pipeline)
    ledger = NodeLedger(pipeline.tick)
    meter = PodMeter(ledger, pipeline.scrape_interval)
    node = NodeSpec("a", 8, 32 * GIB)
    feeds = Feeds(metrics, ledger, meter, {"a": node}, {"a": 0.0})
    ours = OurExtender(shipped, NOW)
    meter.started(POD, "a", 0.0)
    for k in range(5):  # 75 s at 50% (the pod's 2 cores of 8, and 25% unseen)
        t = 15 * k
        if k:
            metrics.observe("a", 0.5, 15)
        metrics.scrape(["a"], {"a": 0.0})
        if t % 30 == 0:
            metrics.evaluate(t)
        ledger.record(k, "a", 0.5, 0.0)
        generation = ours.engine.snapshot.generation
        ours.observe(t, NOW + t, feeds)
        assert ours.engine.snapshot.generation == generation + 1  # every 15 s (the policy's)
        # the measured use on its own loop: herdGuard.usageInterval (60 s)
        assert ours.engine.snapshot.usage.fetched_at == NOW + 60 * (t // 60)
    snapshot = ours.engine.snapshot
    # the node, seen for 60 s: the raw 1m rate covers its window (0.5), the 5m rule reads
    # 1 - idle diluted to (60 + 7.5) / 300; the metric is the larger
    assert snapshot.metrics["cpu"].values == {"a": pytest.approx(1 - 0.5 * 67.5 / 300)}
    # the workload from sum_rate5m: the pod's series (15..60 s, from 0 at 0) diluted;
    # the young pod's own from sum_irate: its use
    workload = snapshot.usage.workloads[WorkloadKey("sim", "deployment", "web")]
    assert workload.cores == pytest.approx(2.0 * (45 + 7.5) / 300) and workload.pods == 1
    assert snapshot.usage.pods == {("sim", "p-1"): pytest.approx(2.0)}
    assert snapshot.usage.fetched_at == NOW + 60


def workload_pod(uid: str, use: float, workload: str = "web", arrival: float = 0.0) -> PodSpec:
    return PodSpec(uid, 100, GIB, use, arrival, 3600.0, workload, "h" if workload else "")


def test_a_workload_is_its_pods_quantile_and_count() -> None:
    record = NodeLedger(15.0)
    for k in range(200):
        record.record(k, "n", 0.5, 0.0)
    meter = PodMeter(record, 15, 300)
    for i, use in enumerate([0.1, 0.2, 0.3, 0.4, 1.0]):
        meter.started(workload_pod(f"w{i}", use), "n", 0.0)
    meter.started(workload_pod("bare", 0.7, workload=""), "n", 0.0)
    meter.started(workload_pod("late", 5.0, arrival=1400.0), "n", 1490.0)  # one sample by 1500
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
    meter.started(workload_pod("old", 0.3, arrival=0.0), "n", 0.0)
    meter.started(workload_pod("young", 0.6, arrival=2000.0), "n", 2000.0)
    table = usage_table(meter, 2000.0 + 300, 0.9, 0.0)
    assert set(table.pods) == {("sim", "young")}  # "old" was created YOUNG_POD s ago or more
    assert table.pods[("sim", "young")] == pytest.approx(0.6)
    assert YOUNG_POD <= 2300
