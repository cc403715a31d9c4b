"""Fixtures for the end-to-end tests: a real control plane (tests/harness/controlplane.py).

* ``control_plane`` (session): one etcd + kube-apiserver for the whole run, started once.
  When the binaries are missing every e2e test is skipped with the one line
  `unavailable_reason()` gives.
* ``namespace`` (function): a namespace of the test's own (with its ``default``
  ServiceAccount); its pods are deleted (grace 0) after the test, then the namespace.
* ``stack`` (function): a factory, ``stack(values, nodes=5, policy=..., ...)``: makes
  exactly those fake nodes, starts our service (a static policy over `values`, or
  `policy`) and kube-scheduler on the config our CLI prints for it; both are stopped
  after the test.

When a test fails, its report carries the log files of every process (and their last
lines).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.harness.controlplane import (
    ControlPlane,
    FakeNode,
    Stack,
    StartStack,
    fake_nodes,
    shipped_policy,
    static_policy,
    tail,
    unavailable_reason,
)
from tests.harness.promharness import FakeExporter, PrometheusServer, prometheus_binary

_NAMESPACES = itertools.count(1)


def _skip_unavailable(reason: str) -> NoReturn:
    pytest.skip(reason)


#: Where every e2e test's skip is reported, so `-ra` folds them into one line.
_SKIP_AT = (str(Path(__file__)), _skip_unavailable.__code__.co_firstlineno + 1)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    reason = unavailable_reason()
    if reason is not None:
        _skip_unavailable(reason)
    plane = ControlPlane(tmp_path_factory.mktemp("controlplane"))
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


#: What the shared Prometheus (`shipped_prometheus`) shows of node CPU: node-1 hot,
#: node-2 and node-3 cool, node-4 warm. A node no story makes simply has no pods.
SHIPPED_VALUES = {"node-1": 0.95, "node-2": 0.30, "node-3": 0.30, "node-4": 0.40}
#: The cluster the preemption stories of issues 35 and 46 measured: 4, 8 and 4 cores.
MIXED_NODES = [
    FakeNode("node-1", cores=4, zone="zone-1"),
    FakeNode("node-2", cores=8, zone="zone-2"),
    FakeNode("node-3", cores=4, zone="zone-1"),
]


@pytest.fixture(scope="session")
def shipped_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus scraping an exporter of the series a stock kube-prometheus-stack
    records (tests/harness/promharness.py), answering config/extender.yaml's query with
    `SHIPPED_VALUES`: started once for every story that runs the shipped policy (its
    first scrape takes about 5 s)."""
    with FakeExporter() as exporter:
        for node, value in SHIPPED_VALUES.items():
            exporter.set(node, value)
        workdir = tmp_path_factory.mktemp("prometheus")
        with PrometheusServer([exporter.target], workdir=workdir, binary=prometheus_binary()) as p:
            query = shipped_policy()["metrics"][0]["query"]
            p.wait_for(query, lambda result: len(result) == len(SHIPPED_VALUES), timeout=60)
            yield p


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"e2e-{next(_NAMESPACES)}-{slug}"[:63].rstrip("-")
    control_plane.kube.create_namespace(name)
    yield name
    control_plane.kube.delete_namespace(name)


#: kube-scheduler's gates as v1.35.4 ships them, and as the next releases may: the stories
#: that bind or preempt run under each (`@pytest.mark.parametrize("scheduler_gates",
#: GATE_VARIANTS, indirect=True)`). SchedulerAsyncAPICalls is beta but off in v1.35.
GATE_VARIANTS = [
    pytest.param({}, id="gates-as-shipped"),
    pytest.param({"SchedulerAsyncAPICalls": True}, id="async-api-calls"),
]


@pytest.fixture
def scheduler_gates(control_plane: ControlPlane, request: pytest.FixtureRequest) -> dict[str, bool]:
    """kube-scheduler's --feature-gates for this test: the control plane's (none, or
    $DECICE_SCHEDULER_FEATURE_GATES), with the test's parameter on top."""
    extra: dict[str, bool] = getattr(request, "param", {})
    return {**control_plane.scheduler_feature_gates, **extra}


#: How late the API server is for our service in the fault stories that run both ways
#: (`@pytest.mark.parametrize("api_late", API_LATE, indirect=True)`): on time, or arriving
#: a second after the service's first list failed. A second stands for any delay: before
#: its first list the service retries every 0.5-1 s whatever the delay (5 s, 20 s, 40 s,
#: minutes: tests/cluster/test_informer.py runs the schedule for each), so a longer
#: delay costs wall time and tests nothing more; test_start_order.py waits 5 s for real.
API_LATE = [pytest.param(None, id="api-on-time"), pytest.param(1.0, id="api-late")]


@pytest.fixture
def api_late(request: pytest.FixtureRequest) -> float | None:
    """Seconds the API server is late for our service (None: it answers at once)."""
    late: float | None = getattr(request, "param", None)
    return late


@pytest.fixture
def stack(
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
    scheduler_gates: dict[str, bool],
    api_late: float | None,
) -> Iterator[StartStack]:
    def start(
        values: Mapping[str, float] | None = None,
        *,
        nodes: int | Sequence[FakeNode] = 5,
        policy: Mapping[str, Any] | Path | None = None,
        env: Mapping[str, str] | None = None,
        percentage_of_nodes_to_score: int | None = None,
        qps: float | None = None,
        weight: int | None = None,
        gates: Mapping[str, bool] | None = None,
        scheduler_overrides: Mapping[str, Any] | None = None,
    ) -> Stack:
        wanted = fake_nodes(nodes) if isinstance(nodes, int) else list(nodes)
        seconds = control_plane.kube.ensure_nodes(wanted)
        chosen = policy if policy is not None else static_policy(values or {})
        learned = None
        if api_late is None:
            service = control_plane.start_extender(chosen, env=env, workdir=tmp_path)
        else:
            service, learned = control_plane.start_extender_before_api(
                chosen, api_late, env=env, workdir=tmp_path
            )
            print(f"\nthe API server {api_late:g} s late: nodes known {learned:.2f} s after it")
        config = control_plane.start_scheduler_for(
            service,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            qps=qps,
            weight=weight,
            feature_gates={**scheduler_gates, **(gates or {})},
            overrides=scheduler_overrides,
        )
        control_plane.wait_scheduler_nodes(len(wanted))
        return Stack(control_plane, namespace, service, config, wanted, seconds, learned)

    yield start
    control_plane.stop_rebalancer()  # a story may have started one (start_rebalancer)
    control_plane.stop_scheduler()
    control_plane.stop_extender()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item (item.rep_setup, rep_call, rep_teardown);
    report every "control plane not available" skip at one place (one line with -ra, not
    one per test); when a phase fails, add the control plane's log files to the report."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    if report.skipped and isinstance(report.longrepr, tuple):
        message = report.longrepr[2]
        if "real control plane not available" in message:
            report.longrepr = (*_SKIP_AT, message)
    plane = getattr(item, "funcargs", {}).get("control_plane")
    if report.failed and isinstance(plane, ControlPlane):
        lines = [f"{name}: {path}" for name, path in plane.log_paths().items()]
        for name in ("kube-scheduler", "extender"):
            path = plane.log_paths().get(name)
            if path is not None:
                lines += ["", f"--- last lines of {path}", tail(path, 15)]
        report.sections.append(("control plane logs", "\n".join(lines)))
    return report
