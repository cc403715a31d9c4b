"""The shipped config/extender.yaml against a real Prometheus running a stock install's rules.

Prometheus here sees only raw series, as in a cluster: node-exporter's
`node_cpu_seconds_total` counters and kube-state-metrics' `kube_pod_info`. It computes
`instance:node_cpu_utilisation:rate5m` and `node_namespace_pod:kube_pod_info:` itself,
with the recording rules of kube-prometheus-stack (kube-prometheus-stack-rules.yaml), and
the extender runs config/extender.yaml unchanged but for PROMETHEUS_URL. Seven minutes of
counter history are backfilled with promtool first, so the `[5m]` rate is whole from the
first scrape, as on a Prometheus that has been up for a while.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.policy.loading import load_settings
from extender.service.compose import build_service
from tests.harness.promharness import (
    PrometheusServer,
    StockExporter,
    approx_values,
    backfill,
    prometheus_binary,
    values_by,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
RULES = Path(__file__).with_name("kube-prometheus-stack-rules.yaml")
NODES = ["node-1", "node-2", "node-3"]
LOAD = {"node-1": 0.2, "node-2": 0.92, "node-3": 0.7}


@pytest.fixture
def stock(tmp_path: Path) -> Iterator[tuple[StockExporter, PrometheusServer]]:
    binary = prometheus_binary()
    with StockExporter() as exporter:
        now = time.time()
        start = now - 420
        for node, load in LOAD.items():
            exporter.set(node, load, now=start)
        workdir = tmp_path / "prometheus"
        backfill(binary, exporter.history(start, now - 2, step=1), workdir)
        with PrometheusServer(
            [exporter.target], workdir=workdir, binary=binary, rule_files=[RULES]
        ) as prometheus:
            yield exporter, prometheus


def ask(client: TestClient, verb: str) -> Any:
    pod = {"metadata": {"name": "p", "uid": "u1"}, "spec": {"schedulerName": "decice_sched"}}
    body = orjson.dumps({"Pod": pod, "NodeNames": NODES, "Nodes": None})
    response = client.post(f"/{verb}", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_shipped_policy_reads_the_stock_recording_rules(
    stock: tuple[StockExporter, PrometheusServer],
) -> None:
    exporter, prometheus = stock
    settings = load_settings(SHIPPED, {"PROMETHEUS_URL": prometheus.url})
    assert settings.prometheus.url == prometheus.url
    query = settings.default.metrics[0].query
    # Prometheus's own answer first: the rules joined node-exporter to node names.
    prometheus.wait_for(query, approx_values(LOAD, tol=0.005), timeout=40)

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
        assert verdict["FailedAndUnresolvableNodes"]["node-2"] == "decice: cpu above 0.9"

        # node-2 goes idle: the 5 m rate falls under the threshold within seconds
        # (0.92 x 300 s of history must shed 0.02), and the next refresh passes it.
        exporter.set("node-2", 0.0)
        prometheus.wait_for(query, lambda r: values_by(r, "node").get("node-2", 1) < 0.88)
        await refresher.refresh_once()
        assert ask(client, "filter")["NodeNames"] == NODES
