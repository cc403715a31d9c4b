"""extender.service.build_service: the one way to wire the service, with injected parts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from extender.config import MetricSettings
from extender.model import NodeInventory
from extender.service import build_service, connect_kube
from tests.conftest import fixture_bytes, make_settings
from tests.kubeapi import FakeKubeAPI, write_kubeconfig

JSON = {"Content-Type": "application/json"}


class Fixed:
    """A provider that answers the same values and counts its calls."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values
        self.calls = 0

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        self.calls += 1
        return dict(self.values)


def test_the_injected_provider_feeds_the_first_refresh_before_serving() -> None:
    provider = Fixed({"node-1": 0.9, "node-3": 0.1})
    service = build_service(make_settings(), provider=provider, clock=lambda: 1000.0)
    assert provider.calls == 0  # nothing runs until the app starts
    with TestClient(service.app) as client:
        assert provider.calls == 1
        answer = client.post(
            "/prioritize", content=fixture_bytes("prioritize-nodecache.json"), headers=JSON
        )
    scores = {h["Host"]: h["Score"] for h in orjson.loads(answer.content)}
    assert scores["node-1"] == 1 and scores["node-3"] == 9
    assert service.engine.snapshot.metrics["cpu"].fetched_at == 1000.0


def test_without_kube_binds_answer_an_error() -> None:
    service = build_service(make_settings())
    with TestClient(service.app) as client:
        r = client.post("/bind", content=fixture_bytes("bind.json"), headers=JSON)
    assert "no Kubernetes client" in r.json()["Error"]


def test_connect_kube_only_when_the_policy_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeKubeAPI() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "t0ken")
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        nothing = {"enabled": False}
        off = make_settings(bind=nothing, herdGuard=nothing, requeue=nothing)
        assert connect_kube(off) is None
        no_watch = {"watchPods": False}
        assert connect_kube(make_settings(bind=nothing, kubernetes=no_watch)) is None
        # Without bindVerb the pod watch still tells the herd guard of every placed pod.
        assert connect_kube(make_settings(bind=nothing)) is not None


def test_per_node_gauges_follow_the_table_and_can_be_turned_off() -> None:
    settings = make_settings(static={"nodes": {"node-1": {"cpu": 0.9}, "node-3": {"cpu": 0.1}}})
    with TestClient(build_service(settings).app) as client:
        text = client.get("/metrics").text
        assert 'decice_node_score{node="node-3"} 9.0' in text
        assert 'decice_node_metric{metric="cpu",node="node-1"} 0.9' in text
    off = make_settings(explain={"nodeMetrics": False})
    with TestClient(build_service(off).app) as client:
        assert "decice_node_score" not in client.get("/metrics").text
