"""extender.decisions.estimate: a pod's expected use, from its workload's measured pods."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.decisions.estimate import expected_cores, expected_use
from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.policy.sections import HerdGuardSettings
from tests.harness.fixtures import NOW

GUARD = HerdGuardSettings()
WEB = WorkloadKey("shop", "deployment", "web")
MEASURED = UsageTable(
    workloads={
        WEB: WorkloadUse(0.9, 12),
        WorkloadKey("shop", "deployment", "db"): WorkloadUse(2, 2),
    },
    pods={("shop", "web-old"): 0.7},
    fetched_at=NOW - 10,
)


def test_a_pod_of_a_measured_workload_expects_its_siblings_p90() -> None:
    e = expected_use("shop", "web-new", WEB, 0.1, MEASURED, GUARD, NOW)
    assert (e.cores, e.source) == (0.9, "workload")
    assert str(e) == "expects 0.9 core (p90 of 12 pods of deployment shop/web)"


def test_the_pod_being_placed_is_judged_at_its_workloads_median_when_known() -> None:
    """One pod most likely uses its siblings' median; the quantile is what the herd guard
    counts placed pods at (a burst of them). Without a median, the quantile."""
    with_median = UsageTable(workloads={WEB: WorkloadUse(0.9, 12, 0.5)}, fetched_at=NOW - 10)
    assert expected_cores("shop", "web-new", lambda: WEB, 0.1, with_median, GUARD, NOW) == 0.5
    assert expected_use("shop", "web-new", WEB, 0.1, with_median, GUARD, NOW).cores == 0.9
    assert expected_cores("shop", "web-new", lambda: WEB, 0.1, MEASURED, GUARD, NOW) == 0.9


def test_a_measured_pod_expects_its_own_use() -> None:
    e = expected_use("shop", "web-old", WEB, 0.1, MEASURED, GUARD, NOW)
    assert (e.cores, e.source, e.basis) == (0.7, "own", "its own measured use")


@pytest.mark.parametrize(
    ("workload", "usage", "guard", "cores", "source", "why"),
    [
        (
            WorkloadKey("shop", "deployment", "db"),
            MEASURED,
            GUARD,
            0.5,
            "request",
            "2 measured pods of deployment shop/db, fewer than minPods 3",
        ),
        (None, MEASURED, GUARD, 0.5, "request", "no workload owns it"),
        (
            WorkloadKey("x", "job", "j"),
            MEASURED,
            GUARD,
            0.5,
            "request",
            "no measured pods of job x/j",
        ),
        (WEB, UsageTable(), GUARD, 0.5, "request", "no measured use yet"),
        (
            WEB,
            UsageTable(error="503: down"),
            GUARD,
            0.5,
            "request",
            "no measured use yet (503: down)",
        ),
        (
            WEB,
            replace(MEASURED, fetched_at=NOW - 601),
            GUARD,
            0.5,
            "request",
            "the measured use is stale",
        ),
        (
            WEB,
            MEASURED,
            GUARD.model_copy(update={"estimate": "request"}),
            0.5,
            "request",
            "herdGuard.estimate: request",
        ),
        (
            WEB,
            MEASURED,
            GUARD.model_copy(update={"min_pods": 20, "request_factor": 2.0}),
            1.0,
            "request",
            "12 measured pods of deployment shop/web, fewer than minPods 20",
        ),
    ],
)
def test_without_trusted_siblings_a_pod_counts_its_request(
    workload: WorkloadKey | None,
    usage: UsageTable,
    guard: HerdGuardSettings,
    cores: float,
    source: str,
    why: str,
) -> None:
    e = expected_use("shop", "new", workload, 0.5, usage, guard, NOW)
    assert (e.cores, e.source) == (cores, source)
    assert e.basis.endswith(why)


def test_without_a_request_the_default() -> None:
    e = expected_use("shop", "new", None, None, MEASURED, GUARD, NOW)
    assert (e.cores, e.source) == (GUARD.default_cpu_request, "default")
    assert e.basis == "no CPU request; no workload owns it"
