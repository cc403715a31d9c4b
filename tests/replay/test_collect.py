"""What the collector asks, in which order, and each bad input it meets, against a fake
source answering canned matrices (the real servers are test_backends' business)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from extender.errors.causes import HTTPStatusError
from extender.replay import problems
from extender.replay.collect import Ask, collect
from extender.replay.facts import Facts
from tests.replay.series import START, STEP, matrix

CPU_QUERY = "max by (node) (node_cpu_ratio)"
FROM, TO = START + 600, START + 3600
NOW = TO + 60


@dataclass
class Chunk:
    result: list[Any]
    done: float


class FakeSource:
    """Answers by the first route whose text the PromQL contains; records every ask."""

    def __init__(self, routes: dict[str, list[dict[str, Any]]], retention: str | None = "15d"):
        self.routes = routes
        self.kept = retention
        self.asked: list[tuple[str, float, float, float, int]] = []
        self.down: BaseException | None = None

    def probe(self) -> None:
        if self.down is not None:
            raise self.down

    def retention(self) -> str | None:
        return self.kept

    def query_range(
        self, promql: str, start: float, end: float, step: float, series: int = 1
    ) -> Iterator[Chunk]:
        self.asked.append((promql, start, end, step, series))
        answer = next((a for route, a in self.routes.items() if route in promql), [])
        inside = [
            {"metric": s["metric"], "values": [v for v in s["values"] if start <= v[0] <= end]}
            for s in answer
        ]
        yield Chunk([s for s in inside if s["values"]], 1.0)


def every(
    step: float, value: float, first: float = START, last: float = TO + 900
) -> list[tuple[float, float]]:
    n = int((last - first) // step) + 1
    return [(first + i * step, value) for i in range(n)]


def healthy() -> dict[str, list[dict[str, Any]]]:
    pod = {"namespace": "shop", "pod": "web-1", "uid": "u1"}
    created = FROM + 300
    return {
        "count(kube_node_status_allocatable": [matrix({}, every(300, 1))],
        "count(up)": [matrix({}, every(300, 1))],
        "count(kube_pod_info": [matrix({}, every(300, 1))],
        "count(node_namespace_pod_container": [matrix({}, every(300, 1))],
        f"count({CPU_QUERY})": [matrix({}, every(300, 1))],
        "sum by (namespace, pod) (node_namespace_pod_container": [
            matrix({"namespace": "shop", "pod": "web-1"}, every(STEP, 0.5, created))
        ],
        "kube_node_status_allocatable": [matrix({"node": "n1", "resource": "cpu"}, every(300, 4))],
        "kube_pod_info": [matrix({**pod, "node": "n1"}, every(300, 1, created + 300))],
        "kube_pod_created": [matrix(pod, every(300, created, created + 300))],
        "kube_pod_container_resource_requests": [
            matrix({**pod, "resource": "cpu"}, every(300, 0.1, created + 300))
        ],
        "namespace_workload_pod": [
            matrix({**pod, "workload": "web", "workload_type": "deployment"}, every(300, 1))
        ],
        "node_cpu_ratio": [matrix({"node": "n1"}, every(STEP, 0.5))],
    }


def run(source: FakeSource, **more: Any) -> tuple[Facts, list[str]]:
    ask = Ask(FROM, TO, STEP, CPU_QUERY, **more)
    collected = collect(
        source, ask, NOW, lambda label, done: None, url="http://p:9090", auth="no auth",
        policy="p.yaml",
    )  # fmt: skip
    return collected.facts, collected.notes


def test_a_healthy_history_is_folded_and_the_fine_queries_chunked_by_series() -> None:
    source = FakeSource(healthy())
    facts, notes = run(source)
    assert notes == []
    assert facts.nodes["n1"].cores == 4 and facts.nodes["n1"].cpu is not None
    assert facts.pods[("shop", "web-1", "u1")].node == "n1"
    assert ("shop", "web-1") in facts.usage
    grid = facts.grid
    fine = {q: (start, step, series) for q, start, _, step, series in source.asked if step == STEP}
    assert fine[CPU_QUERY] == (grid.start, STEP, 1)  # one node
    usage = next(q for q in fine if q.startswith("sum by (namespace, pod)"))
    assert fine[usage] == (grid.measured_start, STEP, 1)  # one replayed pod alive at most
    assert f">= {grid.measured_start:.0f}" in usage  # only pods created in the range


def test_every_missing_series_is_named_at_once() -> None:
    routes = healthy()
    for gone in ("namespace_workload_pod", "count(node_namespace_pod_container"):
        routes[gone] = []
    with pytest.raises(problems.MissingSeries) as caught:
        run(FakeSource(routes))
    text = str(caught.value)
    assert "  namespace_workload_pod:kube_pod_owner:relabel (" in text
    assert "defaultRules.rules.k8sPodOwner" in text
    assert "defaultRules.rules.k8sContainerCpuUsageSecondsTotal" in text


def test_a_cpu_query_that_answers_nothing_though_its_series_exist() -> None:
    routes = healthy()
    routes[f"count({CPU_QUERY})"] = []
    routes["count(node_cpu_ratio)"] = [matrix({}, every(300, 1))]
    with pytest.raises(problems.MissingSeries, match="answers nothing over the range though"):
        run(FakeSource(routes))


def test_no_data_at_all() -> None:
    with pytest.raises(problems.NoData, match="no data between"):
        run(FakeSource({}))


def test_data_but_no_nodes_names_the_missing_series() -> None:
    with pytest.raises(problems.MissingSeries, match="kube_node_status_allocatable"):
        run(FakeSource({"count(up)": [matrix({}, every(300, 1))]}))


def test_a_range_the_retention_dropped() -> None:
    routes = healthy()
    routes["count(kube_node_status_allocatable"] = [matrix({}, every(300, 1, TO - 600))]
    with pytest.raises(problems.BeyondRetention, match="but the server keeps 30m"):
        run(FakeSource(routes, retention="30m"))


def test_data_that_begins_late_within_the_retention_is_noted() -> None:
    routes = healthy()
    routes["count(kube_node_status_allocatable"] = [matrix({}, every(300, 1, TO - 600))]
    facts, notes = run(FakeSource(routes, retention="15d"))
    first = TO - 600 - facts.window  # the window the first count answered for
    assert notes == [f"no node data before {problems.when(first)}: replayed from there"]


def test_unreachable_and_refused() -> None:
    source = FakeSource(healthy())
    source.down = ConnectionRefusedError(111, "Connection refused")
    with pytest.raises(
        problems.Unreachable, match=r"^cannot query http://p:9090: connection refused"
    ):
        run(source)
    source.down = HTTPStatusError(403, b"forbidden")
    with pytest.raises(problems.Refused) as caught:
        run(source)
    assert str(caught.value) == (
        "http://p:9090 refused the query (HTTP 403) with no auth: check the prometheus section "
        "of p.yaml (bearerTokenFile, basicAuth, headerFiles, tenant)"
    )


def test_a_failure_in_the_middle_of_the_range_is_named() -> None:
    class Breaks(FakeSource):
        def query_range(
            self, promql: str, start: float, end: float, step: float, series: int = 1
        ) -> Iterator[Chunk]:
            if promql == CPU_QUERY:
                raise TimeoutError("timed out")
            return super().query_range(promql, start, end, step, series)

    with pytest.raises(problems.Unreachable, match=r"^cannot query http://p:9090: timeout"):
        run(Breaks(healthy()))


def test_too_large_before_any_fine_query() -> None:
    source = FakeSource(healthy())
    with pytest.raises(problems.TooLarge):
        run(source, max_memory=1024.0)
    assert not [a for a in source.asked if a[3] == STEP]


def without(routes: dict[str, list[dict[str, Any]]], route: str, label: str) -> None:
    """The route's series as a relabeling that drops `label` leaves them."""
    routes[route] = [
        {**s, "metric": {k: v for k, v in s["metric"].items() if k != label}} for s in routes[route]
    ]


def test_pod_series_without_uid_are_named_with_the_release_that_adds_it() -> None:
    routes = healthy()
    for route in ("kube_pod_created", "kube_pod_container_resource_requests"):
        without(routes, route, "uid")
    with pytest.raises(problems.MissingSeries) as caught:
        run(FakeSource(routes))
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("series without a label the replay keys on, between ")
    assert lines[1].startswith(
        "  no uid label on any series of kube_pod_created, kube_pod_container_resource_requests:"
        " pods are told apart by namespace, pod and uid; kube-state-metrics puts uid on every "
        "pod series from v2.1 on"
    )
    assert len(lines) == 2  # nothing else is named: kube_pod_created is there


def test_a_label_some_series_lack_is_named_too() -> None:
    routes = healthy()
    pod = {"namespace": "shop", "pod": "web-2"}  # one series without its uid
    routes["kube_pod_info"].append(matrix({**pod, "node": "n1"}, every(300, 1, FROM + 600)))
    with pytest.raises(
        problems.MissingSeries, match="no uid label on some series of kube_pod_info:"
    ):
        run(FakeSource(routes))


def test_kube_pod_info_without_node_is_named() -> None:
    routes = healthy()
    without(routes, "kube_pod_info", "node")
    with pytest.raises(problems.MissingSeries) as caught:
        run(FakeSource(routes))
    assert "  no node label on any series of kube_pod_info: which node (on kube_pod_info: " in str(
        caught.value
    )


def test_allocatable_without_node_is_named_once() -> None:
    routes = healthy()
    without(routes, "kube_node_status_allocatable", "node")
    with pytest.raises(problems.MissingSeries) as caught:
        run(FakeSource(routes))
    text = str(caught.value)
    assert "  no node label on any series of kube_node_status_allocatable: which node" in text
    assert "kube_node_status_allocatable (" not in text  # not also called missing


def test_a_cpu_query_whose_series_name_no_node() -> None:
    routes = healthy()
    routes["node_cpu_ratio"] = [matrix({"instance": "10.0.0.1:9100"}, every(STEP, 0.5))]
    with pytest.raises(problems.MissingSeries) as caught:
        run(FakeSource(routes))
    assert str(caught.value) == (
        "the policy's cpu query answers series that name no node by prometheus.nodeLabel "
        '(node), e.g. {instance="10.0.0.1:9100"}: keep the label in the query (e.g. '
        "max by (node) (...)), or set prometheus.nodeLabel to the label naming nodes"
    )
