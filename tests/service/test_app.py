"""The HTTP layer through starlette's TestClient: routes, prefix, errors, health, metrics."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.decisions.model import NodeInventory
from extender.policy.policies import MetricSettings
from extender.policy.settings import Settings
from extender.service.compose import build_service
from extender.service.verbs import verb_paths
from tests.harness.fixtures import fixture_bytes, fixture_json, make_settings

JSON = {"Content-Type": "application/json"}
VALUES = {"node-1": 0.4, "node-2": 0.7, "node-3": 0.1, "node-4": 0.1, "node-5": 0.95}


def client_for(settings: Settings) -> TestClient:
    return TestClient(build_service(settings).app)


def policy(**extra: Any) -> Settings:
    return make_settings(
        static={"nodes": {n: {"cpu": v} for n, v in VALUES.items()}},
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
        **extra,
    )


@pytest.fixture
def client() -> Any:
    with client_for(policy()) as c:
        yield c


def test_filter_and_prioritize_with_captured_bodies(client: TestClient) -> None:
    r = client.post("/filter", content=fixture_bytes("filter-nodecache.json"), headers=JSON)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json()["NodeNames"] == ["node-1", "node-2", "node-3", "node-4"]
    assert "node-5" in r.json()["FailedAndUnresolvableNodes"]
    p = client.post("/prioritize", content=fixture_bytes("prioritize-fullnodes.json"), headers=JSON)
    assert [h["Score"] for h in p.json()] == [6, 3, 9, 9, 1]
    full = client.post("/filter", content=fixture_bytes("filter-fullnodes.json"), headers=JSON)
    assert [n["metadata"]["name"] for n in full.json()["Nodes"]["items"]] == [
        "node-1", "node-2", "node-3", "node-4",
    ]  # fmt: skip


def test_every_verb_answers_with_server_timing(client: TestClient) -> None:
    for verb, body in [
        ("filter", "filter-nodecache.json"),
        ("prioritize", "prioritize-nodecache.json"),
        ("preempt", "preempt-nodecache.json"),
        ("bind", "bind.json"),
    ]:
        r = client.post(f"/{verb}", content=fixture_bytes(body), headers=JSON)
        assert r.status_code == 200, verb
        name, _, dur = r.headers["server-timing"].partition(";dur=")
        assert name == "app" and float(dur) >= 0.0


def test_bind_without_kubernetes_is_an_error_not_a_crash(client: TestClient) -> None:
    r = client.post("/bind", content=fixture_bytes("bind.json"), headers=JSON)
    assert r.status_code == 200
    assert "no Kubernetes client" in r.json()["Error"]


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"{not json", JSON, 400, "bad filter request: request body is not valid JSON"),
        (b'{"Pod": 1, "NodeNames": ["a"]}', JSON, 400, "Pod: must be an object"),
        (b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}', JSON, 400, "node list is empty"),
        (b"{}", {"Content-Type": "text/plain"}, 415, "Content-Type must be application/json"),
    ],
)
def test_bad_requests_get_4xx_naming_the_problem(
    client: TestClient, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    r = client.post("/filter", content=body, headers=headers)
    assert r.status_code == status
    assert message in r.json()["Error"]


def test_oversized_body_413_and_wrong_method_405() -> None:
    with client_for(policy(server={"maxBodyBytes": 1000})) as c:
        r = c.post("/filter", content=b" " * 1001, headers=JSON)
        assert r.status_code == 413 and "maxBodyBytes (1000)" in r.json()["Error"]

        def chunks() -> Any:  # no Content-Length: the limit is enforced while streaming
            for _ in range(20):
                yield b" " * 100

        assert c.post("/filter", content=chunks(), headers=JSON).status_code == 413
        assert c.get("/filter").status_code == 405


def test_url_prefix() -> None:
    settings = policy(server={"urlPrefix": "/scheduler/"})
    assert verb_paths(settings)["filter"] == "/scheduler/filter"
    with client_for(settings) as c:
        ok = c.post(
            "/scheduler/prioritize",
            content=fixture_bytes("prioritize-nodecache.json"),
            headers=JSON,
        )
        assert ok.status_code == 200
        assert c.post("/prioritize", content=b"{}", headers=JSON).status_code == 404
        assert c.get("/scheduler/healthz").status_code == 200
        assert c.get("/healthz").status_code == 200


def test_health_ready_metrics_openapi(client: TestClient) -> None:
    assert client.get("/healthz").text == "ok\n"
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["metrics"]["cpu"]["nodes"] == 5
    client.post("/filter", content=fixture_bytes("filter-nodecache.json"), headers=JSON)
    client.post("/filter", content=b"{", headers=JSON)
    text = client.get("/metrics").text
    assert 'decice_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'decice_requests_total{code="400",verb="filter"} 1.0' in text
    assert 'decice_decisions_total{outcome="failed",verb="filter"} 1.0' in text
    assert 'decice_request_duration_seconds_count{verb="filter"} 2.0' in text
    assert 'decice_metric_age_seconds{metric="cpu"}' in text
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) >= {"/filter", "/prioritize", "/bind", "/preempt"}


def test_stale_fail_closed_data_is_not_readiness_but_readyz_data() -> None:
    """Prometheus down under a fail-closed metric: the service still answers (/readyz 200,
    so a rollout is not stalled by an outage), says so in the body, and /readyz/data, for
    monitoring, answers 503."""
    settings = make_settings(
        static={"nodes": {"n": {"other": 1.0}}},
        metrics=[{"name": "cpu", "onMissing": "fail-closed"}, {"name": "other"}],
    )

    class Broken:
        def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
            if metric.name == "cpu":
                raise ConnectionError("prometheus down")
            return {"n": 1.0}

    with TestClient(build_service(settings, provider=Broken()).app) as c:
        r = c.get("/readyz")
        assert r.status_code == 200 and r.json()["ready"] is True
        assert r.json()["dataReady"] is False
        data = c.get("/readyz/data")
        assert data.status_code == 503 and data.json()["dataReady"] is False
        cpu = data.json()["metrics"]["cpu"]
        assert cpu["fresh"] is False and "prometheus down" in cpu["error"]
        assert 'decice_refresh_errors_total{metric="cpu"} 1.0' in c.get("/metrics").text
        # fail-closed: every node is filtered with the reason, never a 5xx.
        f = c.post("/filter", content=fixture_bytes("filter-nodecache.json"), headers=JSON)
        assert f.json()["NodeNames"] == []
        assert f.json()["FailedAndUnresolvableNodes"]["node-1"] == "decice: cpu data missing"


def test_preempt_full_form_comes_back_as_meta_victims(client: TestClient) -> None:
    r = client.post("/preempt", content=fixture_bytes("preempt-fullnodes.json"), headers=JSON)
    victims = r.json()["NodeNameToMetaVictims"]
    # node-5 is filtered; node-2 (0.7) would be too with the preemptor's 2 cores on it (a
    # 4-core default node: +0.5): each node is judged as it would be after preemption.
    assert sorted(victims) == ["node-1", "node-3", "node-4"]
    captured = fixture_json("preempt-fullnodes.response.json")["NodeNameToMetaVictims"]
    assert all(victims[n] == captured[n] for n in victims)


def test_nodes_form_answer_keeps_request_metadata(client: TestClient) -> None:
    data = fixture_json("filter-fullnodes.json")
    data["Nodes"]["metadata"] = {"resourceVersion": "42"}
    r = client.post("/filter", content=orjson.dumps(data), headers=JSON)
    assert r.json()["Nodes"]["metadata"] == {"resourceVersion": "42"}


def test_readyz_data_503_while_a_fail_closed_metric_is_fresh_but_empty() -> None:
    settings = make_settings(
        static={"nodes": {"n": {"other": 1.0}}},
        metrics=[{"name": "cpu", "onMissing": "fail-closed"}, {"name": "other"}],
    )
    with client_for(settings) as c:  # the static provider has no cpu values at all
        assert c.get("/readyz").status_code == 200
        r = c.get("/readyz/data")
        assert r.status_code == 503
        assert r.json()["metrics"]["cpu"] == {
            "fresh": True, "ageSeconds": r.json()["metrics"]["cpu"]["ageSeconds"], "nodes": 0,
            "onMissing": "fail-closed", "error": None,
        }  # fmt: skip


def test_explain_the_last_decision_for_a_pod(client: TestClient) -> None:
    client.post("/filter", content=fixture_bytes("filter-nodecache.json"), headers=JSON)
    r = client.get("/explain", params={"pod": "decice/with-requests"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["pod"]["uid"] == "9e764942-ad6e-420d-b0b4-8a8d15daa8fb"
    assert doc["filteredBy"] == {"decice: cpu above 0.9": 1}
    node5 = next(n for n in doc["nodes"] if n["node"] == "node-5")
    assert node5["detail"] == "cpu=0.95 > 0.9" and node5["metrics"]["cpu"]["value"] == 0.95
    by_uid = client.get("/explain", params={"uid": doc["pod"]["uid"]})
    assert by_uid.json()["nodes"] == doc["nodes"]


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({}, 400, "give exactly one of"),
        ({"pod": "a/b", "uid": "u"}, 400, "give exactly one of"),
        ({"pod": "no-slash"}, 400, "expected NAMESPACE/NAME"),
        ({"pod": "../etc/passwd"}, 400, "not a valid Kubernetes name"),
        ({"pod": "ns/Upper"}, 400, "not a valid Kubernetes name"),
        ({"pod": "ns/x\nFAKE LOG LINE"}, 400, "'ns/x\\nFAKE LOG LINE'"),  # escaped
        ({"pod": "ns/" + "x" * 300}, 400, "..."),
        ({"uid": "<script>"}, 400, "expected a pod UID"),
        ({"pod": "decice/never-seen"}, 404, "no decision recorded for pod decice/never-seen"),
        ({"uid": "0000-1111"}, 404, "no decision recorded for pod with UID 0000-1111"),
    ],
)
def test_explain_bad_and_unknown_pods(
    client: TestClient, params: dict[str, str], status: int, message: str
) -> None:
    r = client.get("/explain", params=params)
    assert r.status_code == status
    assert message in r.json()["Error"], r.json()
    assert len(r.json()["Error"]) < 400
