"""The doctor names the backend and checks the tenant: the pure reading of build info,
then `examine` against the loopback fake Prometheus answering as each backend does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.doctor.backend import Backend, identify, tenant_row
from extender.doctor.examine import examine
from extender.doctor.rows import Row
from extender.errors.causes import HTTPStatusError
from extender.metrics.providers import PrometheusProvider
from extender.policy.backend import PrometheusSettings
from extender.policy.loading import parse_settings
from tests.harness.fakeprom import FakePrometheus, series

PROMETHEUS = {"version": "2.42.0", "revision": "x", "branch": "HEAD", "goVersion": "go1.19"}
MIMIR = {"application": "Grafana Mimir", "version": "2.14.0", "features": {"ruler": True}}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((200, {"status": "success", "data": PROMETHEUS}, {}), Backend("Prometheus", "2.42.0")),
        ((200, {"data": MIMIR}, {}), Backend("Grafana Mimir", "2.14.0")),
        ((200, {"data": {"version": "0.36.1"}}, {}), Backend("Thanos Query", "0.36.1")),
        ((200, {"data": {}}, {"X-Server-Hostname": "vm"}), Backend("VictoriaMetrics")),
        ((404, None, {"x-server-hostname": "vmselect-0"}), Backend("VictoriaMetrics")),
        (
            (200, {"data": {}}, {}),
            Backend("VictoriaMetrics (build info without a version)", known=False),
        ),
        (
            (404, None, {}),
            Backend("unknown (no build info: Cortex, or a proxy in front?)", known=False),
        ),
    ],
    ids=["prometheus", "mimir", "thanos", "vm", "vmselect", "no-version", "cortex"],
)
def test_the_backend_is_named_from_its_build_info(
    answer: tuple[int, Any, dict[str, str]], expected: Backend
) -> None:
    assert identify(answer) == expected


def section(**fields: Any) -> PrometheusSettings:
    return PrometheusSettings.model_validate(fields)


def test_the_tenant_row() -> None:
    mimir, prom = Backend("Grafana Mimir", "2.14.0"), Backend("Prometheus", "2.42.0")
    refused = HTTPStatusError(401, b"no org id\n")
    failed = tenant_row(section(), None, refused)
    assert failed is not None and failed.status == "FAIL"
    assert "set prometheus.tenant, or headerFiles X-Scope-OrgID" in failed.detail
    assert tenant_row(section(), prom, None) is None
    missing = tenant_row(section(), mimir, None)
    assert missing is not None and missing.status == "warn" and "anonymous" in missing.detail
    assert tenant_row(section(tenant="a"), mimir, None) == Row("tenant", "ok", "X-Scope-OrgID: a")
    from_file = tenant_row(section(headerFiles={"x-scope-orgid": "/s/t"}), mimir, None)
    assert from_file == Row("tenant", "ok", "X-Scope-OrgID: from /s/t")
    ignored = tenant_row(section(tenant="a"), prom, None)
    assert ignored is not None and ignored.status == "warn" and "no tenants" in ignored.detail
    assert tenant_row(section(tenant="a"), Backend("Thanos Query", "0.36.1"), None) is not None
    assert tenant_row(section(), None, HTTPStatusError(401, b"bad token")) is None


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as fake:
        yield fake


async def doctor_rows(prom: FakePrometheus, **section: Any) -> dict[str, Row]:
    settings = parse_settings(
        {
            "prometheus": {"url": prom.url, "timeout": 2, **section},
            "metrics": [{"name": "cpu", "query": "node_cpu", "maxAge": 60}],
        }
    )
    provider = PrometheusProvider(settings.prometheus)
    rows = await examine(settings, provider.query, None, "none", build_info=provider.build_info)
    return {r.check: r for r in rows}


async def test_mimir_without_a_tenant_fails_naming_the_fix(prom: FakePrometheus) -> None:
    prom.build_info(200, {"status": "success", "data": MIMIR})
    prom.raw(401, b"no org id\n")
    rows = await doctor_rows(prom)
    assert rows["backend"] == Row("backend", "ok", "Grafana Mimir 2.14.0")
    assert rows["tenant"].status == "FAIL" and rows["prometheus"].status == "FAIL"
    assert "query cpu" not in rows


async def test_mimir_with_a_tenant_and_a_partial_answer(prom: FakePrometheus) -> None:
    prom.build_info(200, {"status": "success", "data": MIMIR})
    now = [series({"node": "n1"}, "0.5")]
    prom.series(now)
    rows = await doctor_rows(prom, tenant="team-a")
    assert rows["tenant"] == Row("tenant", "ok", "X-Scope-OrgID: team-a")
    assert rows["query cpu"] == Row("query cpu", "ok", "1 series")
    assert {h["x-scope-orgid"] for h in prom.headers} == {"team-a"}
    body = b'{"status":"success","warnings":["store 10.0.0.9:10901 unavailable"],'
    body += b'"data":{"resultType":"vector","result":[{"metric":{"node":"n1"},"value":[1,"0.5"]}]}}'
    prom.raw(200, body)
    rows = await doctor_rows(prom, tenant="team-a")
    assert rows["query cpu"].status == "warn"
    assert rows["query cpu"].detail.startswith(
        "partial answer (1 series): store 10.0.0.9:10901 unavailable; until a whole answer"
    )
    assert rows["range cpu"].status == "ok"  # what did come is still checked
