"""Fixtures for tests against a real Prometheus on 127.0.0.1 (a pytest plugin: the root
conftest.py loads it, so every test directory can ask for them).

* ``exporter`` (function scope): a ``FakeExporter`` with no nodes and no raw override.
  It is one module-scoped instance, reset before each test.
* ``prometheus`` (function scope): a running ``PrometheusServer`` scraping ``exporter``.
  It is one module-scoped server (started once per test module); before each test it is
  (re)started if a previous test stopped it, its config is restored if a test changed
  it, and the fixture waits until none of the exporter's old series are visible, so
  each test starts from an empty view.

A missing prometheus binary fails the test with a message naming ``scripts/setup``;
it is never a skip (see ``promharness.prometheus_binary``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.promharness import FakeExporter, PrometheusServer, prometheus_binary


@pytest.fixture(scope="module")
def _shared_exporter() -> Iterator[FakeExporter]:
    with FakeExporter() as exporter:
        yield exporter


@pytest.fixture(scope="module")
def _shared_prometheus(
    _shared_exporter: FakeExporter, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    binary = prometheus_binary()
    server = PrometheusServer(
        [_shared_exporter.target], workdir=tmp_path_factory.mktemp("prometheus"), binary=binary
    )
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def exporter(_shared_exporter: FakeExporter) -> Iterator[FakeExporter]:
    _shared_exporter.reset()
    yield _shared_exporter
    _shared_exporter.reset()


@pytest.fixture
def prometheus(
    exporter: FakeExporter, _shared_prometheus: PrometheusServer
) -> Iterator[PrometheusServer]:
    server = _shared_prometheus
    config = server.config_file.read_text()
    server.start()  # no-op if running; restarts it if a previous test stopped it
    server.wait_for_no_exporter_series()
    yield server
    if server.config_file.read_text() != config:
        server.config_file.write_text(config)
        if server.running:
            server.reload()
