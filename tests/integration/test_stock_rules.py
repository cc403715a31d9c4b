"""The shipped config/extender.yaml against a real Prometheus running a stock install's rules.

Prometheus here sees only raw series, as in a cluster: node-exporter's
`node_cpu_seconds_total` counters and kube-state-metrics' `kube_pod_info`. It computes
`instance:node_cpu_utilisation:rate5m` and `node_namespace_pod:kube_pod_info:` itself,
with the recording rules of kube-prometheus-stack (kube-prometheus-stack-rules.yaml), and
the extender runs config/extender.yaml unchanged but for PROMETHEUS_URL. Seven minutes of
counter history are backfilled with promtool first, so the `[5m]` rate is whole from the
first scrape, as on a Prometheus that has been up for a while.

The test runs on VictoriaMetrics too: the same series scraped by it, the same rules run by
vmalert, the same history imported through its import API.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from starlette.testclient import TestClient

from extender.policy.loading import load_settings
from extender.service.compose import build_service
from tests.harness.prometheus_fixtures import BACKENDS, metrics_server
from tests.harness.promharness import MetricsServer, StockExporter, approx_values, values_by

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
#: The shipped CPU threshold, and the filter reason of a node above it.
ABOVE: float = yaml.safe_load(SHIPPED.read_text())["metrics"][0]["filter"]["above"]
HOT_REASON = f"decice: cpu above {ABOVE:g}"
RULES = Path(__file__).with_name("kube-prometheus-stack-rules.yaml")
NODES = ["node-1", "node-2", "node-3"]
#: node-2 hot, but near enough the threshold that its 5-minute rule falls under it in about
#: half a minute once the node goes idle (the fall below).
LOAD = {"node-1": 0.2, "node-2": 0.88, "node-3": 0.7}


@pytest.fixture(params=BACKENDS)
def stock(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[StockExporter, MetricsServer]]:
    with StockExporter() as exporter:
        now = time.time()
        start = now - 420
        for node, load in LOAD.items():
            exporter.set(node, load, now=start)
        with metrics_server(
            request.param,
            [exporter.target],
            tmp_path / request.param,
            rule_files=[RULES],
            history=exporter.history(start, now - 2, step=1),
        ) as server:
            yield exporter, server


def ask(client: TestClient, verb: str) -> Any:
    pod = {"metadata": {"name": "p", "uid": "u1"}, "spec": {"schedulerName": "decice_sched"}}
    body = orjson.dumps({"Pod": pod, "NodeNames": NODES, "Nodes": None})
    response = client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_shipped_policy_reads_the_stock_recording_rules(
    stock: tuple[StockExporter, MetricsServer],
) -> None:
    exporter, server = stock
    settings = load_settings(SHIPPED, {"PROMETHEUS_URL": server.url})
    assert settings.prometheus.url == server.url
    query = settings.default.metrics[0].query
    # The server's own answer first: the rules joined node-exporter to node names.
    server.wait_for(query, approx_values(LOAD, tol=0.005), timeout=40)

    service = build_service(settings)
    refresher = service.refresher
    with TestClient(service.app) as client:
        ready = client.get("/readyz").json()
        assert ready["ready"] is True and ready["metrics"]["cpu"]["nodes"] == 3
        scores = {h["Host"]: h["Score"] for h in ask(client, "prioritize")}
        assert scores == {"node-1": 8, "node-2": 1, "node-3": 3}
        verdict = ask(client, "filter")
        assert verdict["NodeNames"] == ["node-1", "node-3"]
        assert list(verdict["FailedAndUnresolvableNodes"]) == ["node-2"]
        assert verdict["FailedAndUnresolvableNodes"]["node-2"] == HOT_REASON

        if server.kind != "prometheus":
            return  # the fall below is the same rule algebra; it costs half a minute per backend
        # node-2 goes idle: the query's 5-minute half falls under the threshold less the pod
        # (no request, so the default 0.1 core, 0.05 of these 2-core nodes) in about 31 s
        # at 0.85 (0.88 x 300 s of history must shed 0.09), and the next refresh passes it.
        exporter.set("node-2", 0.0)
        server.wait_for(
            query, lambda r: values_by(r, "node").get("node-2", 1) < ABOVE - 0.06, timeout=90
        )
        await refresher.refresh_once()
        assert ask(client, "filter")["NodeNames"] == NODES


async def test_edge_nodes_sharing_an_address_are_each_keyed_by_name(tmp_path: Path) -> None:
    """KubeEdge sites reuse private addresses: two edge nodes with the InternalIP
    192.168.1.10 scrape as the same `instance`. The shipped query keys node-exporter's
    series by node name through kube_pod_info (each node's node-exporter pod), never by
    address, so each node gets its own value and the hot one alone is filtered."""
    edge = {"edge-a": 0.2, "edge-b": 0.95}
    with StockExporter() as exporter:
        now = time.time()
        start = now - 420
        for node, load in edge.items():
            exporter.set(node, load, now=start, ip="192.168.1.10")
        with metrics_server(
            "prometheus",
            [exporter.target],
            tmp_path / "prometheus",
            rule_files=[RULES],
            history=exporter.history(start, now - 2, step=1),
        ) as server:
            settings = load_settings(SHIPPED, {"PROMETHEUS_URL": server.url})
            query = settings.default.metrics[0].query
            server.wait_for(query, approx_values(edge, tol=0.01), timeout=40)
            service = build_service(settings)
            with TestClient(service.app) as client:
                pod = {
                    "metadata": {"name": "p", "uid": "u1"},
                    "spec": {"schedulerName": "decice_sched"},
                }
                body = orjson.dumps({"Pod": pod, "NodeNames": list(edge)})
                headers = {"Content-Type": "application/json"}
                verdict = client.post("/filter", content=body, headers=headers).json()
    assert verdict["NodeNames"] == ["edge-a"]
    assert verdict["FailedAndUnresolvableNodes"] == {"edge-b": HOT_REASON}
