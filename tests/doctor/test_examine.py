"""`decice-extender doctor`: each diagnosis of extender.doctor from constructed inputs,
then the command against a real Prometheus and the loopback API server."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.cli.main import main
from extender.cluster.client import KubeClient
from extender.cluster.client.errors import KubeError
from extender.decisions.model import NodeInfo
from extender.doctor.cluster import Permission, nodes_row, permission_row, permissions
from extender.doctor.examine import examine
from extender.doctor.prometheus import (
    Series,
    age_row,
    auth_text,
    mapping_row,
    parse_series,
    query_row,
    range_row,
    reachable_row,
)
from extender.doctor.rows import Row, exit_code, render
from extender.metrics.stock import CONTAINER_CPU, POD_OWNER
from extender.policy.backend import BasicAuth, PrometheusSettings
from extender.policy.loading import parse_settings
from extender.policy.policies import MetricSettings
from tests.harness.kubeapi import FakeKubeAPI, client_for, write_kubeconfig
from tests.harness.loopback import LoopbackServer, free_port
from tests.harness.prometheus_fixtures import BACKENDS, metrics_server
from tests.harness.promharness import MetricsServer
from tests.harness.promharness import _series as exposition

NODES = [NodeInfo(f"node-{i}", (f"10.0.0.{i}",)) for i in (1, 2, 3)]
CPU = MetricSettings(name="cpu", query="node_cpu")


def by_node(values: dict[str, float], label: str = "node", **extra: str) -> list[Series]:
    return [Series({label: k, **extra}, v) for k, v in values.items()]


# --- parsing ---------------------------------------------------------------------------


def test_parse_series_keeps_labels_and_value() -> None:
    got = parse_series(
        [
            {"metric": {"node": "node-1"}, "value": [1700000000.5, "0.25"]},
            {"metric": {"node": "node-2"}, "value": [1700000000.5, "not a number"]},
            "garbage",
            {"metric": {}, "value": None},
        ]
    )
    assert got[0] == Series({"node": "node-1"}, 0.25)
    assert got[1].labels == {"node": "node-2"} and math.isnan(got[1].value)
    assert len(got) == 3 and math.isnan(got[2].value)


# --- Prometheus --------------------------------------------------------------------------


def test_reachability_names_the_auth_and_the_cause_without_secrets() -> None:
    settings = PrometheusSettings(
        url="https://prom:9090",
        headers={"X-Scope-OrgID": "tenant-a"},
        header_files={"X-Api-Key": "/etc/key"},
        bearer_token_file="/var/run/token",
        caFile="/etc/ca.pem",
    )
    text = auth_text(settings)
    assert "bearer token from /var/run/token" in text and "headers X-Scope-OrgID" in text
    assert "tenant-a" not in text and "CA /etc/ca.pem" in text
    assert "X-Api-Key from /etc/key" in text
    basic = PrometheusSettings(basic_auth=BasicAuth(username="decice", password_file="/etc/pw"))
    assert auth_text(basic) == "basic auth as decice"
    assert auth_text(PrometheusSettings(tenant="t")) == "tenant t"
    assert auth_text(PrometheusSettings()) == "no auth"
    assert reachable_row(settings, None).status == "ok"
    refused = OSError(111, "Connection refused")
    row = reachable_row(settings, ConnectionError("boom", refused))
    assert row.status == "FAIL" and "https://prom:9090" in row.detail
    assert "refused" in row.detail.lower() and "metrics not checked" in row.detail


def test_query_row_fails_on_an_error_and_on_no_series() -> None:
    from extender.errors.causes import HTTPStatusError

    body = b'{"status":"error","errorType":"bad_data","error":"1:5: parse error"}'
    error = query_row(CPU, HTTPStatusError(400, body))
    assert error.status == "FAIL" and "bad_data" in error.detail
    empty = query_row(CPU, [])
    assert empty.status == "FAIL" and "no series" in empty.detail
    assert query_row(CPU, by_node({"node-1": 0.1})) == Row("query cpu", "ok", "1 series")


# --- node mapping --------------------------------------------------------------------------


def test_every_node_with_data_is_ok() -> None:
    row = mapping_row(CPU, by_node({"node-1": 0.1, "node-2": 0.2, "node-3": 0.3}), NODES, "node")
    assert row == Row("nodes cpu", "ok", "3 of 3 nodes have data")


def test_node_label_wrong_series_carry_instance_addresses() -> None:
    series = [
        Series({"instance": f"10.0.0.{i}:9100", "job": "node-exporter"}, 0.1) for i in (1, 2, 3)
    ]
    row = mapping_row(CPU, series, NODES, "node")
    assert row.status == "FAIL"
    assert "3 of 3 series have no 'node' label" in row.detail
    assert "their labels: instance, job" in row.detail
    assert "set prometheus.nodeLabel: instance" in row.detail
    assert "no data for 3 of 3 nodes" in row.detail


def test_node_label_wrong_another_label_holds_the_node_names() -> None:
    series = by_node({"node-1": 0.1, "node-2": 0.2, "node-3": 0.3}, label="nodename")
    row = mapping_row(CPU, series, NODES, "node")
    assert row.status == "FAIL"
    assert "'nodename' holds node names: set prometheus.nodeLabel: nodename" in row.detail


def test_instance_addresses_that_match_no_internal_ip_are_shown() -> None:
    series = [Series({"instance": f"192.168.7.{i}:9100"}, 0.1) for i in range(1, 6)]
    row = mapping_row(CPU, series, NODES, "instance")
    assert row.status == "FAIL"
    assert "instance 192.168.7.1:9100, 192.168.7.2:9100, 192.168.7.3:9100 (+2 more)" in row.detail
    assert "match no node InternalIP (the nodes have 10.0.0.1, 10.0.0.2, 10.0.0.3)" in row.detail


def test_instance_addresses_that_match_map_to_their_nodes() -> None:
    series = [Series({"instance": f"10.0.0.{i}:9100"}, 0.1) for i in (1, 2, 3)]
    assert mapping_row(CPU, series, NODES, "instance").status == "ok"


def test_series_for_nodes_the_api_does_not_list() -> None:
    series = by_node({"node-1": 0.1, "node-2": 0.2, "node-3": 0.3, "old-node": 0.4})
    row = mapping_row(CPU, series, NODES, "node")
    assert row.status == "warn"
    assert "1 series name nodes the API does not list: old-node" in row.detail


def test_a_join_that_drops_nodes() -> None:
    metric = MetricSettings(
        name="cpu", query="max by (node) (a * on (namespace, pod) group_left (node) b)"
    )
    row = mapping_row(metric, by_node({"node-1": 0.1}), NODES, "node")
    assert row.status == "warn"
    assert "no data for 2 of 3 nodes: node-2, node-3" in row.detail
    assert "the query returns 1 series for 3 nodes (a join in the query drops them)" in row.detail
    plain = mapping_row(CPU, by_node({"node-1": 0.1}), NODES, "node")
    assert "series for 3 nodes" in plain.detail and "join" not in plain.detail


def test_missing_nodes_fail_when_the_metric_fails_closed() -> None:
    metric = MetricSettings(name="cpu", query="node_cpu", on_missing="fail-closed")
    row = mapping_row(metric, by_node({"node-1": 0.1, "node-2": 0.2}), NODES, "node")
    assert row.status == "FAIL" and "fail-closed filters these nodes out" in row.detail


def test_duplicates_and_non_finite_values_are_warnings() -> None:
    series = [
        *by_node({"node-1": 0.1, "node-2": 0.2, "node-3": math.nan}),
        Series({"node": "node-1"}, 0.3),
    ]
    row = mapping_row(CPU, series, NODES, "node")
    assert row.status == "warn"
    assert "several series for node-1" in row.detail and "1 series are NaN" in row.detail


# --- age and range -------------------------------------------------------------------------


def test_sample_age_against_max_age() -> None:
    metric = MetricSettings(name="cpu", query="node_cpu", max_age=30)
    now = 1000.0
    fresh = age_row(metric, by_node({"node-1": 999.0, "node-2": 998.0}), now)
    assert fresh.status == "ok" and "oldest 2.0 s (node-2); maxAge 30 s" in fresh.detail
    same = age_row(metric, by_node({"node-1": 999.5, "node-2": 999.5}), now)
    assert same == Row("age cpu", "ok", "sample age 0.5 s; maxAge 30 s")
    stale = age_row(metric, by_node({"node-1": 900.0, "node-2": 880.0}), now)
    assert stale.status == "FAIL" and "2 of 2 series older than maxAge" in stale.detail
    some = age_row(metric, by_node({"node-1": 999.0, "node-2": 880.0}), now)
    assert some.status == "warn" and "1 of 2" in some.detail
    assert age_row(metric, [], now).status == "warn"


def test_values_against_the_range() -> None:
    metric = MetricSettings(name="cpu", query="q", min=0, max=1)
    assert range_row(metric, [0.1, 0.9]).status == "ok"
    percent = range_row(metric, [20.0, 35.0, 60.0])
    assert percent.status == "FAIL" and "cannot tell them apart" in percent.detail
    assert "look like percent: set max: 100" in percent.detail
    some = range_row(metric, [0.5, 1.5])
    assert some.status == "warn" and "1 of 2 values outside min 0 .. max 1" in some.detail
    big = range_row(metric, [500.0, 700.0])
    assert big.status == "FAIL" and "percent" not in big.detail
    candidates = MetricSettings(name="cpu", query="q", normalize="candidates")
    assert range_row(candidates, [500.0]).status == "ok"
    assert range_row(metric, [math.nan]).status == "warn"


# --- Kubernetes ------------------------------------------------------------------------------


def test_the_permissions_follow_the_policy() -> None:
    full = {p.name: p for p in permissions(parse_settings({}))}
    assert set(full) == {
        "list nodes",
        "watch nodes",
        "create pods/binding",
        "list pods",
        "watch pods",
        "patch pods",
        "create events.events.k8s.io",
        "create pods/eviction",
        "list poddisruptionbudgets.policy",
    }
    assert not full["create pods/eviction"].required
    assert not full["list poddisruptionbudgets.policy"].required
    lean = parse_settings(
        {
            "bind": {"enabled": False},
            "kubernetes": {"watchPods": False},
            "requeue": {"enabled": False},
            "explain": {"events": False},
        }
    )
    assert [p.name for p in permissions(lean)] == [
        "list nodes",
        "watch nodes",
        "create pods/eviction",
        "list poddisruptionbudgets.policy",
    ]


def test_a_denied_permission_fails_unless_optional() -> None:
    bind = Permission("create", "pods", subresource="binding", why="bind.enabled")
    assert permission_row(bind, (True, "")) == Row(
        "rbac create pods/binding", "ok", "allowed (bind.enabled)"
    )
    denied = permission_row(bind, (False, ""))
    assert denied.status == "FAIL" and "denied: bind.enabled needs it" in denied.detail
    evict = Permission("create", "pods", subresource="eviction", required=False)
    assert permission_row(evict, (False, "no RBAC policy matched")).status == "warn"
    failed = permission_row(bind, KubeError("forbidden", status=403, reason="Forbidden"))
    assert failed.status == "FAIL" and "403" in failed.detail


def test_the_node_list_row() -> None:
    assert nodes_row(NODES) == Row("kubernetes", "ok", "3 nodes listed")
    assert nodes_row([]).status == "FAIL"
    assert nodes_row([NodeInfo("n1")]).status == "warn"
    error = nodes_row(KubeError("refused", status=None, reason="Unreachable"))
    assert error.status == "FAIL" and "refused" in error.detail


def test_render_and_exit_code() -> None:
    rows = [Row("a", "ok", "fine"), Row("b", "warn", "hm"), Row("c", "FAIL", "broken")]
    text = render(rows)
    assert text.splitlines()[0].split() == ["CHECK", "STATUS", "DETAIL"]
    assert text.endswith("1 FAIL, 1 warn, 1 ok")
    assert exit_code(rows) == 1 and exit_code(rows[:2]) == 0


async def test_examine_without_kubernetes_or_prometheus() -> None:
    settings = parse_settings({"provider": "static", "static": {"nodes": {"n1": {"cpu": 1}}}})
    rows = await examine(settings, None, None, "no kubeconfig at ~/.kube/config")
    assert rows == [
        Row("kubernetes", "FAIL", "no client: no kubeconfig at ~/.kube/config"),
        Row("prometheus", "ok", "not used (static provider)"),
    ]


async def test_access_review_through_the_client() -> None:
    with FakeKubeAPI() as api:
        api.deny("create", "pods/binding")
        kube = KubeClient(client_for(api), timeout=5, retries=0)
        try:
            assert await kube.access_review("create", "pods", subresource="binding") == (
                False,
                "",
            )
            assert await kube.access_review("list", "nodes") == (True, "")
        finally:
            await kube.close()
        (sent,) = [r for r in api.requests if r.method == "POST"][:1]
        assert sent.body["kind"] == "SelfSubjectAccessReview"
        assert sent.body["spec"]["resourceAttributes"] == {
            "verb": "create",
            "group": "",
            "resource": "pods",
            "subresource": "binding",
        }


# --- the command against a real Prometheus (and VictoriaMetrics) and the loopback API server

NOW = time.time()


def _exposition() -> str:
    """What the exporter serves: every scenario's series at once (one Prometheus start)."""
    # An explicit sample time two minutes before the exporter starts (not before this module
    # was imported: a long run may start the fixture minutes later, past the lookback).
    old = int((time.time() - 120) * 1000)
    lines = []
    for i, (cpu, pct) in enumerate(((0.2, 20.0), (0.5, 35.0), (0.7, 60.0)), start=1):
        node = f"node-{i}"
        lines.append(exposition("doctor_cpu", {"node": node}, cpu))
        lines.append(exposition("doctor_pct", {"node": node}, pct))
        exporter = {"instance": f"10.0.0.{i}:9100", "job": "node-exporter"}
        lines.append(exposition("doctor_addr", exporter, cpu))
        lines.append(exposition("doctor_far", {"instance": f"10.9.9.{i}:9100"}, cpu))
        lines.append(exposition("doctor_old", {"node": node}, cpu).rstrip("\n") + f" {old}\n")
    # The two kube-prometheus-stack recorded series the herd guard's estimates read, as a
    # stock install records them: 4 pods of deployment shop/web, 1 of statefulset shop/db.
    for pod, use, workload, kind in (
        ("web-a", 0.2, "web", "deployment"),
        ("web-b", 0.4, "web", "deployment"),
        ("web-c", 0.6, "web", "deployment"),
        ("web-d", 0.8, "web", "deployment"),
        ("db-0", 2.0, "db", "statefulset"),
    ):
        at = {"namespace": "shop", "pod": pod}
        lines.append(exposition(CONTAINER_CPU.name, {**at, "container": "app"}, use))
        owner = {**at, "workload": workload, "workload_type": kind}
        lines.append(exposition(POD_OWNER.name, owner, 1))
    return "".join(lines)


class _Exporter:
    def __init__(self, text: str) -> None:
        from http.server import BaseHTTPRequestHandler

        body = text.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = LoopbackServer(Handler, name="doctor-exporter")


#: What the backend row names each backend (VictoriaMetrics 1.79 tells no version).
BACKEND_NAMES = {
    "prometheus": ("Prometheus 2.", "Prometheus 3."),
    "victoriametrics": ("VictoriaMetrics",),
}
#: How each backend's error for a query it cannot parse reads, as the doctor relays it:
#: Prometheus' errorType, VictoriaMetrics' (its HTTP status) and parser message.
PARSE_ERROR = {"prometheus": ("bad_data",), "victoriametrics": ("422", "unexpected token")}


@pytest.fixture(scope="module", params=BACKENDS)
def prometheus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    """A real Prometheus, then a real VictoriaMetrics (the test ids say which)."""
    exporter = _Exporter(_exposition())
    target = f"127.0.0.1:{exporter.server.port}"
    server = metrics_server(
        request.param,
        [target],
        tmp_path_factory.mktemp(request.param),
        lookback="10m",  # doctor_old's two-minute-old samples stay visible
    )
    try:
        server.start()
        for name in ("doctor_cpu", "doctor_old"):
            server.wait_for(name, lambda result: len(result) == 3)
        yield server
    finally:
        server.close()
        exporter.server.close()


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(token="doctor-token") as server:
        for node in NODES:
            server.add_node(node.name, node.internal_ips[0])
        yield server


def run_doctor(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    api: FakeKubeAPI,
    url: str,
    metric: dict[str, Any],
    node_label: str = "node",
) -> tuple[int, dict[str, Row], str]:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "doctor-token")
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    policy = {
        "prometheus": {"url": url, "timeout": 3, "nodeLabel": node_label},
        "metrics": [{"name": "cpu", "maxAge": 30, **metric}],
        "kubernetes": {"kubeconfig": str(kubeconfig)},
    }
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(policy))
    code = main(["doctor", "--config", str(path)])
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines()[1:]:
        for status in (" ok ", " warn ", " FAIL "):
            if status in line:
                check, detail = line.split(status, 1)
                name, state = check.strip(), status.strip()
                assert state in ("ok", "warn", "FAIL")
                rows[name] = Row(name, state, detail.strip())  # type: ignore[arg-type]
                break
    return code, rows, out


Run = Any


@pytest.fixture
def doctor(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    api: FakeKubeAPI,
    prometheus: MetricsServer,
) -> Run:
    def run(
        metric: dict[str, Any], node_label: str = "node", url: str | None = None
    ) -> tuple[int, dict[str, Row], str]:
        return run_doctor(
            tmp_path, capsys, monkeypatch, api, url or prometheus.url, metric, node_label
        )

    return run


@pytest.mark.integration
def test_a_healthy_cluster_is_all_ok(doctor: Run, prometheus: MetricsServer) -> None:
    code, rows, out = doctor({"query": "doctor_cpu"})
    print(out)
    assert code == 0, out
    assert {r.status for r in rows.values()} == {"ok"}, out
    assert list(rows) == [
        "kubernetes",
        "prometheus",
        "backend",
        "query cpu",
        "nodes cpu",
        "age cpu",
        "range cpu",
        "herd window",
        "workload use",
        "rbac list nodes",
        "rbac watch nodes",
        "rbac create pods/binding",
        "rbac list pods",
        "rbac watch pods",
        "rbac patch pods",
        "rbac create events.events.k8s.io",
        "rbac create pods/eviction",
        "rbac list poddisruptionbudgets.policy",
    ]
    assert rows["nodes cpu"].detail == "3 of 3 nodes have data"
    assert rows["backend"].detail.startswith(BACKEND_NAMES[prometheus.kind]), out
    assert rows["range cpu"].detail == "values 0.2 .. 0.7 within min 0 .. max 1"
    assert rows["herd window"].detail.startswith("whole for 45s, then gone at once")
    assert rows["workload use"].detail == (
        "2 workloads measured, 1 with at least minPods 3 pods, "
        "e.g. deployment shop/web p90 0.74 core of 4 pods"
    )


@pytest.mark.integration
def test_prometheus_unreachable(doctor: Run) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, rows, out = doctor({"query": "doctor_cpu"}, url=url)
    assert code == 1
    assert rows["prometheus"].status == "FAIL"
    assert "connection refused" in rows["prometheus"].detail, out
    assert "query cpu" not in rows
    assert rows["rbac create pods/binding"].status == "ok"


@pytest.mark.integration
def test_a_query_error(doctor: Run, prometheus: MetricsServer) -> None:
    code, rows, out = doctor({"query": "sum(doctor_cpu"})
    assert code == 1
    assert rows["query cpu"].status == "FAIL"
    for word in PARSE_ERROR[prometheus.kind]:
        assert word in rows["query cpu"].detail, out


@pytest.mark.integration
def test_node_label_wrong(doctor: Run) -> None:
    code, rows, out = doctor({"query": "doctor_addr"})
    print(out)
    assert code == 1
    detail = rows["nodes cpu"].detail
    assert rows["nodes cpu"].status == "FAIL", out
    assert "3 of 3 series have no 'node' label" in detail
    assert "their labels: instance, job" in detail
    assert "set prometheus.nodeLabel: instance" in detail


@pytest.mark.integration
def test_instance_matching_no_internal_ip(doctor: Run) -> None:
    code, rows, out = doctor({"query": "doctor_far"}, node_label="instance")
    print(out)
    assert code == 1
    assert rows["nodes cpu"].status == "FAIL", out
    assert "instance 10.9.9.1:9100, 10.9.9.2:9100, 10.9.9.3:9100 match no node InternalIP" in (
        rows["nodes cpu"].detail
    )


@pytest.mark.integration
def test_a_stale_metric(doctor: Run) -> None:
    code, rows, out = doctor({"query": "doctor_old", "maxAge": 5})
    assert code == 1
    assert rows["age cpu"].status == "FAIL", out
    assert "3 of 3 series older than maxAge" in rows["age cpu"].detail


@pytest.mark.integration
def test_values_beyond_max(doctor: Run) -> None:
    code, rows, out = doctor({"query": "doctor_pct", "max": 1})
    assert code == 1
    assert rows["range cpu"].status == "FAIL", out
    assert "values 20 .. 60" in rows["range cpu"].detail
    assert "look like percent" in rows["range cpu"].detail


@pytest.mark.integration
def test_a_denied_permission(doctor: Run, api: FakeKubeAPI) -> None:
    api.deny("create", "pods/binding")
    api.deny("create", "pods/eviction")
    code, rows, out = doctor({"query": "doctor_cpu"})
    print(out)
    assert code == 1
    assert rows["rbac create pods/binding"].status == "FAIL", out
    assert "denied: bind.enabled needs it" in rows["rbac create pods/binding"].detail
    assert rows["rbac create pods/eviction"].status == "warn"
    assert [r.check for r in rows.values() if r.status == "FAIL"] == ["rbac create pods/binding"]


@pytest.mark.integration
def test_two_policies_each_metric_checked_once_with_its_users(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    api: FakeKubeAPI,
    prometheus: MetricsServer,
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "doctor-token")
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    cpu = {"name": "cpu", "query": "doctor_cpu", "maxAge": 30, "filter": {"above": 0.9}}
    busy = {"name": "busy", "query": "doctor_pct", "max": 100, "maxAge": 30}
    policy = {
        "prometheus": {"url": prometheus.url, "timeout": 3},
        "kubernetes": {"kubeconfig": str(kubeconfig)},
        "defaultPolicy": "web",
        "policies": {
            "web": {"metrics": [cpu]},
            "batch": {"metrics": [{**cpu, "weight": 1}, {**busy, "weight": 3}]},
        },
    }
    path = tmp_path / "two-policies.yaml"
    path.write_text(json.dumps(policy))
    code = main(["doctor", "--config", str(path)])
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    lines = out.splitlines()
    assert [ln.split()[1] for ln in lines if ln.startswith("query ")] == ["cpu", "busy"]
    assert "3 series (policies web, batch)" in out and "3 series (policies batch)" in out
    assert "range busy" in out and "values 20 .. 60 within min 0 .. max 100" in out


def test_overload_taints_need_to_patch_nodes_and_their_lease() -> None:
    settings = parse_settings(
        {
            "metrics": [{"name": "cpu", "query": "q", "filter": {"above": 0.9}}],
            "overload": {"enabled": True, "leaseNamespace": "decice-system"},
        }
    )
    wanted = {p.name: p for p in permissions(settings)}
    assert wanted["patch nodes"].required and wanted["get nodes"].required
    lease = wanted["update leases.coordination.k8s.io"]
    assert not lease.required and lease.namespace == "decice-system"
    assert "decice-system/decice-overload" in lease.why
    assert "patch nodes" not in {p.name for p in permissions(parse_settings({}))}


async def test_workload_use_names_the_missing_stock_rules() -> None:
    """No workload answered: doctor asks for each stock series the query reads and names
    the kube-prometheus-stack setting that records the missing ones."""
    settings = parse_settings(
        {"prometheus": {"url": "http://127.0.0.1:9"}, "metrics": [{"name": "cpu", "query": "up"}]}
    )
    asked: list[str] = []

    def query(promql: str) -> list[Any]:
        asked.append(promql)
        if promql.startswith("count(kube_pod_created"):
            return [{"metric": {}, "value": [NOW, "12"]}]
        return [{"metric": {"node": "node-1"}, "value": [NOW, "0.3"]}] if promql == "up" else []

    rows = {r.check: r for r in await examine(settings, query, None, "none")}
    assert rows["workload use"].status == "warn"
    detail = rows["workload use"].detail
    assert "defaultRules.rules.k8sContainerCpuUsageSecondsTotal" in detail
    assert "defaultRules.rules.k8sPodOwner" in detail
    assert "kube_pod_created" not in detail  # it is there
    assert detail.endswith("placed pods count at their CPU request until it answers")
    by_request = settings.model_copy(
        update={"herd_guard": settings.herd_guard.model_copy(update={"estimate": "request"})}
    )
    rows = {r.check: r for r in await examine(by_request, query, None, "none")}
    assert "workload use" not in rows and rows["herd window"].status == "ok"
