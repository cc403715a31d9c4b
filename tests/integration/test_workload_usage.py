"""The herd guard's default usage queries on a stock install's rules, from raw series.

The backend sees what a cluster's exporters give it (tests/harness/workloads.py):
cAdvisor's per-container `container_cpu_usage_seconds_total` counters (and each pod's own
cgroup, `image=""`), kube-state-metrics' `kube_pod_info`, `kube_pod_owner`,
`kube_replicaset_owner` and `kube_pod_created`, node-exporter's CPU counters. It records
`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m` and
`namespace_workload_pod:kube_pod_owner:relabel` itself, with kube-prometheus-stack's rule
groups (kube-prometheus-stack-rules.yaml), over seven minutes of backfilled counters. The
shipped config/extender.yaml's herd guard (its default `usageQuery` and `podUsageQuery`)
then reads each workload's p90 and pod count and each young pod's own use, on Prometheus
and on VictoriaMetrics (vmalert running the same rules).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from extender.decisions.usage import UsageTable, WorkloadKey
from extender.metrics.providers import PrometheusProvider
from extender.metrics.usage import fetch_usage
from extender.policy.loading import load_settings
from tests.harness.prometheus_fixtures import BACKENDS, metrics_server
from tests.harness.promharness import MetricsServer, approx_values
from tests.harness.workloads import Owner, WorkloadExporter

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
RULES = Path(__file__).with_name("kube-prometheus-stack-rules.yaml")
NS = "shop"
WEB = Owner("ReplicaSet", "web-6d4b75cb6d")
DB = Owner("StatefulSet", "db")
#: pod -> (node, cores used). node-2 (4 cores, background 0.5 = 2 cores) is asked for
#: 2 + 0.5 + 2.0 = 4.5 cores: it serves everything on it 4/4.5 of what it asks.
WEB_PODS = {
    "web-6d4b75cb6d-bcdfg": ("node-1", 1.0),
    "web-6d4b75cb6d-hjklm": ("node-1", 0.5),
    "web-6d4b75cb6d-npqrs": ("node-2", 0.5),
    "web-6d4b75cb6d-tvwxz": ("node-2", 2.0),
}
SERVED = 4 / 4.5
WEB_USE = sorted([1.0, 0.5, 0.5 * SERVED, 2.0 * SERVED])


def quantile(values: list[float], q: float) -> float:
    """PromQL's quantile (linear between the closest ranks)."""
    rank = q * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


@pytest.fixture(params=BACKENDS)
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[WorkloadExporter, MetricsServer]]:
    with WorkloadExporter() as exporter:
        now = time.time()
        start = now - 420
        exporter.add_node("node-1", cores=8, background=0.1, now=start)
        exporter.add_node("node-2", cores=4, background=0.5, now=start)
        exporter.add_replicaset(NS, WEB.name, Owner("Deployment", "web"))
        for pod, (node, use) in WEB_PODS.items():
            exporter.run(NS, pod, node, use, WEB, now=start)
        # Old pods (created an hour ago): workloads count them, the young-pod query not.
        exporter.run(NS, "db-0", "node-1", 0.25, DB, created=now - 3600, now=start)
        exporter.run(NS, "db-1", "node-1", 0.75, DB, created=now - 3600, now=start)
        exporter.run(NS, "debug", "node-1", 0.3, None, now=start)  # a bare pod
        with metrics_server(
            request.param,
            [exporter.target],
            tmp_path / request.param,
            rule_files=[RULES],
            history=exporter.history(start, now - 2, step=5),
        ) as server:
            yield exporter, server


def test_the_default_usage_queries_read_the_stock_rules(
    cluster: tuple[WorkloadExporter, MetricsServer],
) -> None:
    exporter, server = cluster
    settings = load_settings(SHIPPED, {"PROMETHEUS_URL": server.url})
    guard = settings.herd_guard
    assert guard.estimate == "usage"
    # The node metric the shipped policy reads: background plus the pods, capped at 1.
    nodes = {"node-1": exporter.demand("node-1"), "node-2": 1.0}
    assert nodes["node-1"] == pytest.approx((0.8 + 1.5 + 1.0 + 0.3) / 8)
    assert exporter.demand("node-2") == pytest.approx(4.5 / 4)
    server.wait_for(settings.default.metrics[0].query, approx_values(nodes, tol=0.01), 60)

    provider = PrometheusProvider(settings.prometheus)
    web = WorkloadKey(NS, "deployment", "web")
    db = WorkloadKey(NS, "statefulset", "db")
    found: list[UsageTable] = []

    # The young pods (created in the last 15 minutes) and their own use; not db-0, db-1.
    expected = {
        (NS, name): use * (SERVED if node == "node-2" else 1.0)
        for name, (node, use) in WEB_PODS.items()
    }
    expected[(NS, "debug")] = 0.3

    def measured() -> bool:
        """Every series there, and every rate settled (a slow scrape bends a young rate)."""
        table = fetch_usage(provider, guard, time.time())
        found[:] = [table]
        settled = set(table.pods) == set(expected) and all(
            table.pods[pod] == pytest.approx(use, rel=0.01) for pod, use in expected.items()
        )
        return {web, db} <= set(table.workloads) and settled

    server.wait_for("up", lambda _: measured(), timeout=60)
    table = found[0]
    assert table.workloads[web].pods == 4
    assert table.workloads[web].cores == pytest.approx(quantile(WEB_USE, 0.9), rel=0.01)
    assert table.workloads[db].pods == 2
    assert table.workloads[db].cores == pytest.approx(quantile([0.25, 0.75], 0.9), rel=0.01)
    # A bare pod is its own workload to the stock rules (workload_type barepod): it has no
    # siblings to tell anything, so the default query leaves it out.
    assert all(key.kind != "barepod" for key in table.workloads)
    assert set(table.pods) == set(expected)
    for pod, use in expected.items():
        assert table.pods[pod] == pytest.approx(use, rel=0.01), pod
