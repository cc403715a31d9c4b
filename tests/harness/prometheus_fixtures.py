"""Fixtures for tests against a real Prometheus, or a real VictoriaMetrics, on 127.0.0.1
(a pytest plugin: the root conftest.py loads it, so every test directory can ask for them).

* ``exporter`` (function scope): a ``FakeExporter`` with no nodes and no raw override.
  It is one module-scoped instance, reset before each test.
* ``prometheus`` (function scope): a running ``PrometheusServer`` scraping ``exporter``.
  It is one module-scoped server (started once per test module); before each test it is
  (re)started if a previous test stopped it, its config is restored if a test changed
  it, and the fixture waits until none of the exporter's old series are visible, so
  each test starts from an empty view.
* ``backend`` (function scope, parametrized over ``BACKENDS``: the test ids say
  ``[prometheus]`` or ``[victoriametrics]``): the same as ``prometheus``, on each
  backend in turn; each backend's server is shared by the module as ``prometheus``'s is.
* ``metrics_server(kind, ...)``: a server of either kind for a test's own fixture (its
  own exporter, recording rules, history).

A missing prometheus or victoria-metrics binary fails the test with a message naming
``scripts/setup``; it is never a skip (see ``promharness.prometheus_binary``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.promharness import (
    FakeExporter,
    MetricsServer,
    PrometheusServer,
    backfill,
    prometheus_binary,
)
from tests.harness.vmharness import (
    VictoriaMetricsServer,
    victoria_metrics_binary,
    vmalert_binary,
)

#: The servers of the Prometheus query API the integration tests run on, as test ids.
BACKENDS = ("prometheus", "victoriametrics")


def metrics_server(
    kind: str,
    targets: list[str],
    workdir: Path,
    *,
    rule_files: list[Path] | None = None,
    history: str | None = None,
    lookback: str = "5s",
) -> MetricsServer:
    """A server of ``kind`` (one of ``BACKENDS``), not started, scraping ``targets`` each
    second, evaluating ``rule_files`` (Prometheus itself; vmalert beside VictoriaMetrics)
    and holding ``history`` (OpenMetrics text: backfilled with promtool, or imported on
    the first start), with a ``lookback`` window for bare selectors."""
    if kind == "prometheus":
        binary = prometheus_binary()
        if history is not None:
            backfill(binary, history, workdir)
        return PrometheusServer(
            targets, workdir=workdir, binary=binary, rule_files=rule_files, lookback_delta=lookback
        )
    assert kind == "victoriametrics", kind
    return VictoriaMetricsServer(
        targets,
        workdir=workdir,
        binary=victoria_metrics_binary(),
        vmalert=vmalert_binary() if rule_files else None,
        rule_files=rule_files,
        history=history,
        lookback=lookback,
    )


@pytest.fixture(scope="module")
def _shared_exporter() -> Iterator[FakeExporter]:
    with FakeExporter() as exporter:
        yield exporter


def _shared(
    kind: str, exporter: FakeExporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    server = metrics_server(kind, [exporter.target], tmp_path_factory.mktemp(kind))
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def _shared_prometheus(
    _shared_exporter: FakeExporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    yield from _shared("prometheus", _shared_exporter, tmp_path_factory)


@pytest.fixture(scope="module")
def _shared_victoriametrics(
    _shared_exporter: FakeExporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsServer]:
    yield from _shared("victoriametrics", _shared_exporter, tmp_path_factory)


@pytest.fixture
def exporter(_shared_exporter: FakeExporter) -> Iterator[FakeExporter]:
    _shared_exporter.reset()
    yield _shared_exporter
    _shared_exporter.reset()


@contextlib.contextmanager
def _fresh(server: MetricsServer) -> Iterator[MetricsServer]:
    """``server`` (re)started with no exporter series visible; its scrape config restored
    afterwards if the test changed it."""
    config = server.config_file.read_text()
    server.start()  # no-op if running; restarts it if a previous test stopped it
    server.wait_for_no_exporter_series()
    yield server
    if server.config_file.read_text() != config:
        server.config_file.write_text(config)
        if server.running:
            server.reload()


@pytest.fixture
def prometheus(
    exporter: FakeExporter, _shared_prometheus: PrometheusServer
) -> Iterator[PrometheusServer]:
    with _fresh(_shared_prometheus):
        yield _shared_prometheus


@pytest.fixture(params=BACKENDS)
def backend(exporter: FakeExporter, request: pytest.FixtureRequest) -> Iterator[MetricsServer]:
    server: MetricsServer = request.getfixturevalue(f"_shared_{request.param}")
    with _fresh(server):
        yield server
