"""The chart's readiness probe through a Prometheus outage (docs/operating.md, "When
Prometheus is down"): the probe the chart renders asks /readyz, which means "the service
can answer", so an outage never marks the extender's pod NotReady (which would stall a
rollout and gain nothing: the scheduler beside it calls it anyway). The data's state is
on /readyz/data: 503 while a fail-closed metric has no fresh values, 200 under the
chart's fail-open default."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from extender.cluster.client import KubeClient
from extender.policy.loading import load_settings
from extender.service.compose import build_service
from tests.deploy.chart import render_mod
from tests.harness.kubeapi import FakeKubeAPI, client_for

RELEASE = "decice-extender"
NAMESPACE = "decice-system"


def render() -> list[dict[str, Any]]:
    docs = render_mod.render_chart({}, name=RELEASE, namespace=NAMESPACE)
    return [yaml.safe_load(doc) for doc in render_mod.documents(docs)]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(("on_missing", "data_status"), [("fail-open", 200), ("fail-closed", 503)])
async def test_the_rendered_probe_stays_ready_while_prometheus_is_down(
    tmp_path: Path, on_missing: str, data_status: int
) -> None:
    objs = render()
    [deployment] = [
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "decice-extender"
    ]
    [extender] = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if "readyz" in str(c)
    ]
    probe = extender["readinessProbe"]["httpGet"]["path"]
    [config_map] = [
        o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-policy")
    ]
    policy = yaml.safe_load(config_map["data"]["extender.yaml"])
    for metric in policy["metrics"]:
        metric["onMissing"] = on_missing  # the chart ships fail-open; an operator's choice
    path = tmp_path / "extender.yaml"
    path.write_text(yaml.safe_dump(policy))
    dead = f"http://127.0.0.1:{closed_port()}"
    settings = load_settings(path, environ={"PROMETHEUS_URL": dead})
    with FakeKubeAPI() as api:
        api.add_node("node-a", "10.0.0.1", cpu="4")
        kube = KubeClient(client_for(api), timeout=2, retries=0)
        service = build_service(settings, kube=kube)
        errors = await service.refresher.refresh_once()  # Prometheus refuses: no data
        assert errors, "the refresh against a closed port must fail"
        transport = httpx.ASGITransport(app=service.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            ready = await client.get(probe)
            data = await client.get("/readyz/data")
        await kube.close()
    assert probe == "/readyz"
    assert ready.status_code == 200, ready.text
    assert ready.json()["ready"] is True
    assert ready.json()["dataReady"] is (data_status == 200)
    assert data.status_code == data_status, data.text
