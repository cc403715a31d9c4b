"""Scores and filter verdicts follow a real Prometheus, and change when its values change.

A real `prometheus` on 127.0.0.1 scrapes an exporter the test serves, shaped like a stock
kube-prometheus-stack after its recording rules; the extender runs the stock join query.
Every test runs twice, on Prometheus and on VictoriaMetrics (the `backend` fixture).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.cluster.client import KubeClient
from extender.policy.loading import parse_settings
from extender.policy.policies import DEFAULT_CPU_QUERY
from extender.policy.settings import Settings
from extender.service.compose import build_service
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.promharness import FakeExporter, MetricsServer, approx_values

pytestmark = pytest.mark.integration

NODES = ["node-1", "node-2", "node-3"]


def policy(url: str, **extra: Any) -> Settings:
    raw: dict[str, Any] = {
        "prometheus": {"url": url, "interval": 0.5, "timeout": 3},
        "metrics": [
            {"name": "cpu", "query": DEFAULT_CPU_QUERY, "filter": {"above": 0.9}, "maxAge": 30}
        ],
    }
    raw.update(extra)
    return parse_settings(raw)


def ask(client: TestClient, verb: str, names: list[str]) -> Any:
    body = {
        "Pod": {"metadata": {"name": "p", "uid": "u1"}, "spec": {"schedulerName": "decice_sched"}},
        "NodeNames": names,
        "Nodes": None,
    }
    response = client.post(
        f"/{verb}", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text
    return response.json()


def scores(client: TestClient) -> dict[str, int]:
    return {h["Host"]: h["Score"] for h in ask(client, "prioritize", NODES)}


async def test_scores_and_verdicts_follow_prometheus(
    exporter: FakeExporter, backend: MetricsServer
) -> None:
    exporter.set("node-1", 0.2)
    exporter.set("node-2", 0.95)
    exporter.set("node-3", 0.5)
    backend.wait_for(
        DEFAULT_CPU_QUERY, approx_values({"node-1": 0.2, "node-2": 0.95, "node-3": 0.5})
    )
    settings = policy(backend.api_url)  # VictoriaMetrics: a URL with a path, as vmselect's
    service = build_service(settings)
    refresher = service.refresher
    with TestClient(service.app) as client:  # lifespan: the first refresh runs before serving
        assert client.get("/readyz").json()["metrics"]["cpu"]["nodes"] == 3
        assert scores(client) == {"node-1": 8, "node-2": 1, "node-3": 5}
        verdict = ask(client, "filter", NODES)
        assert verdict["NodeNames"] == ["node-1", "node-3"]
        assert verdict["FailedAndUnresolvableNodes"] == {"node-2": "decice: cpu above 0.9"}
        exporter.set("node-1", 0.93)
        exporter.set("node-2", 0.1)
        backend.wait_for(
            DEFAULT_CPU_QUERY, approx_values({"node-1": 0.93, "node-2": 0.1, "node-3": 0.5})
        )
        await refresher.refresh_once()
        # node-1 just swung up: its predicted peak (herdGuard.peakSigmas) adds a margin to
        # the 0.93 it shows, which may cost it the last point (it is filtered anyway).
        got = scores(client)
        assert got["node-1"] in (0, 1) and (got["node-2"], got["node-3"]) == (9, 5)
        assert ask(client, "filter", NODES)["NodeNames"] == ["node-2", "node-3"]
        metrics = client.get("/metrics").text
        assert 'decice_metric_nodes{metric="cpu"} 3.0' in metrics


async def test_instance_label_maps_addresses_to_nodes_through_the_api(
    exporter: FakeExporter, backend: MetricsServer
) -> None:
    exporter.set("node-1", 0.1, ip="10.9.0.1")
    exporter.set("node-2", 0.7, ip="10.9.0.2")
    query = 'instance:node_cpu_utilisation:rate5m{job="node-exporter"}'
    backend.wait_for(query, lambda r: len(r) == 2)
    with FakeKubeAPI() as api:
        api.add_node("node-1", "10.9.0.1")
        api.add_node("node-2", "10.9.0.2")
        settings = parse_settings(
            {
                "prometheus": {"url": backend.url, "nodeLabel": "instance"},
                "metrics": [{"name": "cpu", "query": query}],
            }
        )
        kube = KubeClient(client_for(api).configuration, timeout=2, retries=0)
        service = build_service(settings, kube=kube)
        engine = service.engine
        await service.prepare()  # the node list: InternalIP -> node name
        assert await service.refresher.refresh_once() == {}
        await kube.close()
    assert dict(engine.snapshot.metrics["cpu"].values) == pytest.approx(
        {"node-1": 0.1, "node-2": 0.7}
    )


async def test_nodename_label_and_unreachable_prometheus_keeps_last_values(
    exporter: FakeExporter, backend: MetricsServer
) -> None:
    exporter.set("node-1", 0.1, mem=0.25)
    exporter.set("node-2", 0.1, mem=0.75)
    backend.wait_for("decice_node_mem", lambda r: len(r) == 2)
    settings = parse_settings(
        {
            "prometheus": {"url": backend.url, "nodeLabel": "nodename", "timeout": 1},
            "metrics": [{"name": "memory", "query": "decice_node_mem", "maxAge": 60}],
            "herdGuard": {"enabled": False},
        }
    )
    service = build_service(settings)
    engine, refresher = service.engine, service.refresher
    assert await refresher.refresh_once() == {}
    assert engine.table(engine.snapshot.taken_at).scores == {"node-1": 8, "node-2": 3}
    backend.stop()
    errors = await refresher.refresh_once()
    assert "memory" in errors
    # After one failure the next try is drawn (errors.backoff) between one and two intervals.
    assert refresher.failures == 1
    assert refresher.interval <= refresher.delay() <= 2 * refresher.interval
    # The last good values are still served, with the error beside them.
    assert engine.snapshot.metrics["memory"].values == pytest.approx(
        {"node-1": 0.25, "node-2": 0.75}
    )
    assert engine.snapshot.metrics["memory"].error is not None
    backend.start()
    backend.wait_for("decice_node_mem", lambda r: len(r) == 2)
    assert await refresher.refresh_once() == {}
    assert refresher.failures == 0
