"""The query API as Thanos, Mimir, Cortex and VictoriaMetrics speak it, against the
loopback fake Prometheus: tenant and Secret-file headers, Thanos' switches, warnings and
partial answers, and a partial answer in the refresher (kept apart from whole ones)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.decisions.engine import Engine
from extender.decisions.model import NodeInventory, Snapshot
from extender.errors.causes import BadAnswer, HTTPStatusError, PartialAnswer, describe
from extender.metrics.providers import PrometheusProvider, partial_cause
from extender.metrics.refresher import Refresher
from extender.policy.backend import PrometheusSettings
from extender.policy.fields import ConfigError
from extender.policy.loading import parse_settings
from extender.policy.policies import MetricSettings
from tests.harness.fakeprom import FakePrometheus, series
from tests.harness.fixtures import make_settings

CPU = MetricSettings(name="cpu", query="node_cpu")
WHOLE = [series({"node": "node-a"}, "0.25"), series({"node": "node-b"}, "0.5")]


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        yield fake


def provider(prom: FakePrometheus, **section: Any) -> PrometheusProvider:
    return PrometheusProvider(PrometheusSettings.model_validate({"url": prom.url, **section}))


def answer(result: list[Any], **extra: Any) -> bytes:
    body = {"status": "success", "data": {"resultType": "vector", "result": result}, **extra}
    return json.dumps(body).encode()


def test_the_tenant_and_secret_file_headers_are_sent_and_files_re_read(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    key = tmp_path / "api-key"
    key.write_text("k1\n")
    ask = provider(prom, tenant="team-a", headerFiles={"X-Api-Key": str(key)})
    prom.series(WHOLE)
    assert ask.fetch(CPU, NodeInventory()) == {"node-a": 0.25, "node-b": 0.5}
    key.write_text("k2")  # a Secret rotated under its mount
    ask.query("node_cpu")
    sent = [(h["x-scope-orgid"], h["x-api-key"]) for h in prom.headers]
    assert sent == [("team-a", "k1"), ("team-a", "k2")]


def test_a_missing_header_file_names_its_key(prom: FakePrometheus, tmp_path: Path) -> None:
    ask = provider(prom, headerFiles={"X-Scope-OrgID": str(tmp_path / "gone")})
    with pytest.raises(BadAnswer) as caught:
        ask.query("up")
    assert describe(caught.value).startswith("prometheus.headerFiles.X-Scope-OrgID: cannot read")
    assert prom.queries == []


def test_thanos_switches_are_sent_only_when_set(prom: FakePrometheus) -> None:
    provider(prom, dedup=False, partialResponse=True).query("up")
    provider(prom).query("up")
    first, second = prom.queries
    assert (first["dedup"], first["partial_response"]) == (["false"], ["true"])
    assert first["query"] == ["up"] and first["timeout"] == ["5s"]
    assert "dedup" not in second and "partial_response" not in second


@pytest.mark.parametrize(
    ("extra", "cause"),
    [
        ({"isPartial": True}, "isPartial: some storage nodes did not answer"),
        (
            {"warnings": ["No StoreAPIs matched for this query", "PromQL info: x"]},
            "No StoreAPIs matched for this query",
        ),
    ],
    ids=["victoriametrics-cluster", "thanos"],
)
def test_a_partial_answer_raises_with_what_came(
    prom: FakePrometheus, extra: dict[str, Any], cause: str
) -> None:
    prom.raw(200, answer(WHOLE[:1], **extra))
    with pytest.raises(PartialAnswer) as caught:
        provider(prom).query("node_cpu")
    assert caught.value.result == WHOLE[:1]
    assert describe(caught.value) == f"partial answer (1 series): {cause}"


def test_promql_annotations_leave_the_answer_whole(prom: FakePrometheus) -> None:
    warnings = ['PromQL warning: metric might not be a counter, name does not end in "_total"']
    prom.raw(200, answer(WHOLE, warnings=warnings, isPartial=False))
    assert provider(prom).query("node_cpu") == WHOLE
    assert partial_cause({"warnings": "not a list"}) is None
    assert partial_cause(None) is None


@pytest.mark.parametrize(
    ("status", "body", "text"),
    [
        (401, b"no org id\n", "HTTP 401 from Prometheus: no org id"),
        (200, b"<html>proxy login</html>", "Prometheus answered 200 but not JSON"),
        (200, b'{"status": "success"}', "Prometheus answered 200 without data.result"),
    ],
)
def test_refusals_and_garbage_keep_their_cause(
    prom: FakePrometheus, status: int, body: bytes, text: str
) -> None:
    prom.raw(status, body)
    with pytest.raises((HTTPStatusError, BadAnswer)) as caught:
        provider(prom).query("up")
    assert describe(caught.value).startswith(text)


def test_answers_are_asked_for_compressed(prom: FakePrometheus) -> None:
    provider(prom).query("up")
    assert "gzip" in prom.headers[0]["accept-encoding"]


def test_build_info_comes_back_with_its_headers(prom: FakePrometheus) -> None:
    prom.build_info(200, {"status": "success", "data": {}}, {"X-Server-Hostname": "vm-0"})
    status, body, headers = provider(prom, tenant="t").build_info()
    assert (status, body) == (200, {"status": "success", "data": {}})
    assert headers["X-Server-Hostname"] == "vm-0"
    assert prom.headers == []  # build info is not a query: not recorded as one


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"headers": {"Authorization": "Bearer abc"}}, "Authorization would put a credential"),
        ({"headers": {"cookie": "s=1"}}, "cookie would put a credential"),
        ({"headers": {"X-Scope-OrgID": "a"}, "tenant": "b"}, "headers.X-Scope-OrgID and tenant"),
        (
            {"headerFiles": {"authorization": "/f"}, "bearerTokenFile": "/t"},
            "headerFiles.authorization and bearerTokenFile/basicAuth",
        ),
        ({"headers": {"bad header": "x"}}, "bad header"),
        ({"tenant": ""}, "tenant"),
        ({"dedup": "yes"}, "dedup"),
    ],
)
def test_the_section_refuses_secrets_in_plain_text_and_headers_set_twice(
    section: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings({"prometheus": section})
    assert message in str(caught.value)


class Partial:
    """Whole once, then partial answers, then whole again."""

    def __init__(self) -> None:
        self.calls = 0

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[str, float]:
        self.calls += 1
        if self.calls in (2, 3):
            raise PartialAnswer("partial answer (1 series): store down", [])
        return {"node-a": 0.1 * self.calls, "node-b": 0.2}


async def test_a_partial_answer_keeps_the_last_whole_values_until_they_age_out() -> None:
    settings = make_settings(
        prometheus={"interval": 2, "maxBackoff": 10},
        metrics=[{"name": "cpu", "query": "q", "maxAge": 5, "onMissing": "fail-closed"}],
    )
    clock = [1000.0]
    engine = Engine(settings, Snapshot.empty(["cpu"]), clock[0])
    refresher = Refresher(settings, engine, Partial(), clock=lambda: clock[0])

    def passing() -> set[str]:
        return {n for n in ("node-a", "node-b") if engine.table(clock[0]).passes(n)}

    await refresher.refresh_once()
    clock[0] += 2
    errors = await refresher.refresh_once()
    cpu = engine.snapshot.metrics["cpu"]
    assert cpu.values == {"node-a": 0.1, "node-b": 0.2} and cpu.fetched_at == 1000.0
    assert errors == {"cpu": "partial answer (1 series): store down"} == {"cpu": cpu.error}
    assert refresher.delay() == 2.0  # the server answered: no back-off
    assert passing() == {"node-a", "node-b"}
    clock[0] += 4  # the last whole answer is 6 s old, past maxAge: onMissing decides
    await refresher.refresh_once()
    assert passing() == set()
    clock[0] += 2
    assert await refresher.refresh_once() == {}
    assert engine.snapshot.metrics["cpu"].values == {"node-a": 0.4, "node-b": 0.2}
    assert passing() == {"node-a", "node-b"}
