"""extender.service.compose.build_service: the one way to wire the service, with injected parts."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from extender.cluster.connect import KubeConnection, connect_kube, open_kube
from extender.decisions.model import NodeInventory
from extender.policy.policies import MetricSettings
from extender.service.compose import build_service
from tests.harness.fixtures import fixture_bytes, make_settings
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig

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
        assert 'decice_node_score{node="node-3",policy="default"} 9.0' in text
        assert 'decice_node_metric{metric="cpu",node="node-1"} 0.9' in text
    off = make_settings(explain={"nodeMetrics": False})
    with TestClient(build_service(off).app) as client:
        assert "decice_node_score" not in client.get("/metrics").text


def test_bind_enabled_without_a_kube_client_is_not_ready(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No kubeconfig: filter and prioritize answer, every bind fails, so the pod is not
    Ready, and the start-up log says why at ERROR."""
    missing = tmp_path / "kubeconfig"
    settings = make_settings(kubernetes={"kubeconfig": str(missing)})
    kube = open_kube(settings)
    assert kube.client is None and kube.problem is not None and str(missing) in kube.problem
    with caplog.at_level(logging.WARNING, logger="decice.service"):
        service = build_service(settings, kube=kube.client, kube_problem=kube.problem)
    problem = f"bind: enabled but no Kubernetes client: {kube.problem}"
    assert service.problems == (problem,)
    assert [(r.levelname, r.getMessage().split("; every")[0]) for r in caplog.records] == [
        ("ERROR", problem)
    ]
    with TestClient(service.app) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["problems"] == [problem]
        assert ready.json()["metrics"]["cpu"]["fresh"] is True  # the metrics are fine
        for verb in ("filter", "prioritize"):
            body = fixture_bytes(f"{verb}-nodecache.json")
            assert client.post(f"/{verb}", content=body, headers=JSON).status_code == 200
        bound = client.post("/bind", content=fixture_bytes("bind.json"), headers=JSON)
        assert "no Kubernetes client" in bound.json()["Error"]
    # the metrics listener's /readyz (the kubelet's probe) says the same
    with TestClient(service.metrics_app) as client:
        assert client.get("/readyz").json()["problems"] == [problem]


def test_without_bind_a_missing_kube_client_is_a_warning_and_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(bind={"enabled": False})
    with caplog.at_level(logging.WARNING, logger="decice.service"):
        service = build_service(settings, kube_problem="no usable kubeconfig")
    assert service.problems == ()
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "no usable kubeconfig" in caplog.records[0].getMessage()
    with TestClient(service.app) as client:
        assert client.get("/readyz").status_code == 200
        assert "problems" not in client.get("/readyz").json()


def test_open_kube_builds_the_client_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nothing = {"enabled": False}
    unneeded = open_kube(make_settings(bind=nothing, herdGuard=nothing, requeue=nothing))
    assert unneeded == KubeConnection(None)
    broken = tmp_path / "broken"
    broken.write_text("clusters: [")
    failed = open_kube(make_settings(kubernetes={"kubeconfig": str(broken)}))
    assert failed.client is None and failed.problem is not None
    assert failed.problem.startswith(f"Kubernetes API ConfigError: cannot load {broken}")
    with FakeKubeAPI() as api:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "t0ken")
        built = open_kube(make_settings(kubernetes={"kubeconfig": str(kubeconfig)}))
        assert built.client is not None and built.problem is None
        asyncio.run(built.client.close())
