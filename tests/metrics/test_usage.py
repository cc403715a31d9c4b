"""extender.metrics.usage: pods' measured use read from the server's answers, and fetched
with each refresh."""

from __future__ import annotations

import random
from typing import Any

import pytest

from extender.decisions.engine import Engine
from extender.decisions.model import NodeInventory, Snapshot
from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.metrics.refresher import Refresher
from extender.metrics.usage import fetch_usage, next_usage, read_pods, read_workloads
from extender.policy.policies import MetricSettings
from extender.policy.sections import HerdGuardSettings
from tests.harness.fixtures import NOW, make_settings


def series(value: Any, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [NOW, value]}


WEB = {"namespace": "shop", "workload": "web", "workload_type": "deployment"}
ANSWER = [
    series("0.9", stat="quantile", **WEB),
    series("0.6", stat="median", **WEB),
    series("12", stat="pods", **WEB),
    series("2", stat="quantile", namespace="shop", workload="db", workload_type="StatefulSet"),
    series("1", stat="pods", namespace="shop", workload="db", workload_type="StatefulSet"),
    series("0.5", stat="quantile", namespace="shop", workload="lonely", workload_type="job"),
    series("NaN", stat="quantile", namespace="x", workload="y", workload_type="job"),
    series("0.3", stat="quantile", workload="no-namespace", workload_type="job"),
    {"metric": "junk"},
    "not a series",
]


def test_workloads_are_read_with_their_counts() -> None:
    assert read_workloads(ANSWER, limit=100) == {
        WorkloadKey("shop", "deployment", "web"): WorkloadUse(0.9, 12, 0.6),
        # PascalCase workload_type (usePascalCaseForWorkloadTypeLabelValues) reads the same
        WorkloadKey("shop", "statefulset", "db"): WorkloadUse(2.0, 1),  # no median: optional
    }
    assert len(read_workloads(ANSWER, limit=1)) == 1  # bounded


def test_young_pods_are_read() -> None:
    answer = [
        series("0.25", namespace="shop", pod="web-1"),
        series("-1", namespace="shop", pod="web-2"),  # a negative rate is no use
        series("0.1", pod="web-3"),
    ]
    assert read_pods(answer, limit=10) == {("shop", "web-1"): 0.25}


class Querying:
    """A provider that can run PromQL (as PrometheusProvider does)."""

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[str] = []
        self.fail = fail

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        return {"a": 0.3}

    def query(self, promql: str, timeout: float | None = None) -> list[Any]:
        self.asked.append(promql)
        if self.fail:
            raise ConnectionError("connection refused")
        if "kube_pod_created" in promql:
            return [series("0.4", namespace="shop", pod="web-1")]
        return ANSWER


def test_fetch_asks_for_the_policy_quantile() -> None:
    querier = Querying()
    table = fetch_usage(querier, HerdGuardSettings(quantile=0.75), NOW)
    assert "quantile by (namespace, workload, workload_type) (0.75," in querier.asked[0]
    assert table.pods == {("shop", "web-1"): 0.4} and table.fetched_at == NOW
    failed = next_usage(table, ConnectionError("refused"))
    assert failed.workloads == table.workloads and failed.fetched_at == NOW
    assert failed.error is not None and "refused" in failed.error


@pytest.mark.parametrize(
    ("herd", "asked"),
    [
        ({}, 2),  # the default: estimates read measured use
        ({"estimate": "request"}, 0),
        ({"enabled": False}, 0),
    ],
)
async def test_each_refresh_brings_the_measured_use(herd: dict[str, Any], asked: int) -> None:
    settings = make_settings(herdGuard=herd)
    engine = Engine(settings, Snapshot.empty(["cpu"]), NOW)
    querier = Querying()
    refresher = Refresher(settings, engine, querier, clock=lambda: NOW)
    await refresher.refresh_once()
    assert querier.asked == []  # the metric refresh never waits for the usage queries
    await refresher.refresh_usage_once()
    assert len(querier.asked) == asked
    usage = engine.snapshot.usage
    assert (usage.fetched_at == NOW) == bool(asked)
    if asked:
        assert usage.workloads[WorkloadKey("shop", "deployment", "web")].pods == 12


async def test_a_failed_usage_fetch_keeps_the_metrics_and_backs_nothing_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings()
    before = UsageTable({WorkloadKey("a", "job", "j"): WorkloadUse(1.0, 3)}, {}, NOW - 15)
    engine = Engine(settings, Snapshot({}, NOW - 15, 0, before), NOW)
    refresher = Refresher(settings, engine, Querying(fail=True), clock=lambda: NOW)
    errors = await refresher.refresh_once()
    assert errors == {} and refresher.failures == 0
    assert await refresher.refresh_usage_once() == "ConnectionError: connection refused"
    refresher.rng = random.Random(7)
    interval = settings.herd_guard.usage_interval
    assert interval <= refresher.usage_delay() <= 2 * interval  # backed off, jittered
    assert engine.snapshot.metrics["cpu"].values == {"a": 0.3}
    usage = engine.snapshot.usage
    assert usage.workloads == before.workloads and usage.fetched_at == NOW - 15
    assert usage.error is not None and "connection refused" in usage.error
    assert "pods' measured use" in caplog.text
    detail = engine.guard.detail(engine.snapshot, NOW)
    assert detail["measuredUse"] == {
        "fresh": True,
        "ageSeconds": 15.0,
        "workloads": 1,
        "youngPods": 0,
        "error": usage.error,
    }


async def test_a_refresh_never_puts_back_older_usage() -> None:
    """The usage loop installs a newer table while a metric refresh is on its way: the
    refresh's snapshot, built from the older one, keeps the newer table."""
    settings = make_settings()
    engine = Engine(settings, Snapshot.empty(["cpu"]), NOW)
    newer = UsageTable({WorkloadKey("a", "job", "j"): WorkloadUse(1.0, 3)}, {}, NOW + 5)
    stale = Snapshot(engine.snapshot.metrics, NOW + 6, 1, UsageTable(fetched_at=NOW))
    engine.install_usage(newer, NOW + 5)
    engine.install(stale, None, NOW + 6)
    assert engine.snapshot.usage is newer
