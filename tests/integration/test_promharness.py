"""The harness works against the real servers: Prometheus, and VictoriaMetrics (`backend`)."""

from __future__ import annotations

import math
import urllib.error
import urllib.request

import pytest
from prometheus_api_client import PrometheusConnect

from tests.harness.promharness import (
    STOCK_NODE_CPU_QUERY,
    FakeExporter,
    MetricsServer,
    approx_values,
    values_by,
)

pytestmark = pytest.mark.integration


def _set_two_nodes(exporter: FakeExporter) -> None:
    exporter.set("node-1", 0.2, ip="10.1.0.1", mem=0.5)
    exporter.set("node-2", 0.9, ip="10.1.0.2", mem=0.25)


def test_exporter_renders_stock_series(exporter: FakeExporter) -> None:
    _set_two_nodes(exporter)
    with urllib.request.urlopen(exporter.url, timeout=5) as resp:
        body = resp.read().decode()
    assert (
        'instance:node_cpu_utilisation:rate5m{job="node-exporter",instance="10.1.0.1:9100",'
        'namespace="monitoring",pod="node-exporter-node-1"} 0.2'
    ) in body
    assert (
        'node_namespace_pod:kube_pod_info:{namespace="monitoring",'
        'pod="node-exporter-node-2",node="node-2"} 1.0'
    ) in body
    assert 'decice_node_cpu{node="node-2"} 0.9' in body
    assert 'decice_node_mem{nodename="node-1"} 0.5' in body
    exporter.serve_raw('x{node="a"} NaN\n')
    assert exporter.render() == 'x{node="a"} NaN\n'
    exporter.serve_raw(None)
    exporter.remove("node-1")
    assert "node-1" not in exporter.render()
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://{exporter.target}/other", timeout=5)


def test_stock_join_follows_values_and_survives_restart(
    exporter: FakeExporter, backend: MetricsServer
) -> None:
    _set_two_nodes(exporter)
    result = backend.wait_for(STOCK_NODE_CPU_QUERY, approx_values({"node-1": 0.2, "node-2": 0.9}))
    # job/instance survive thanks to honor_labels
    raw = backend.query('instance:node_cpu_utilisation:rate5m{instance="10.1.0.2:9100"}')
    assert raw[0]["metric"]["job"] == "node-exporter"
    assert raw[0]["metric"]["pod"] == "node-exporter-node-2"

    # the official client works against it
    client = PrometheusConnect(url=backend.url, disable_ssl=True)
    via_client = client.custom_query(query=STOCK_NODE_CPU_QUERY)
    assert values_by(via_client, "node") == pytest.approx(values_by(result, "node"))

    # other label styles
    backend.wait_for(
        "decice_node_mem", approx_values({"node-1": 0.5, "node-2": 0.25}, label="nodename")
    )

    # a change is seen
    exporter.set("node-1", 0.7)
    backend.wait_for(STOCK_NODE_CPU_QUERY, approx_values({"node-1": 0.7, "node-2": 0.9}))

    # a removed node disappears (staleness markers)
    exporter.remove("node-2")
    backend.wait_for(STOCK_NODE_CPU_QUERY, approx_values({"node-1": 0.7}), timeout=30)

    # stop: no answer; restart on the same port and data dir: answers again
    url = backend.url
    backend.stop()
    assert not backend.running
    with pytest.raises(OSError):
        backend.query("up", timeout=1)
    exporter.set("node-2", 0.4)
    backend.start()
    assert backend.url == url
    backend.wait_for_first_scrape()
    backend.wait_for(STOCK_NODE_CPU_QUERY, approx_values({"node-1": 0.7, "node-2": 0.4}))


def test_garbage_values_and_failing_target(exporter: FakeExporter, backend: MetricsServer) -> None:
    exporter.serve_raw(
        'decice_node_cpu{node="node-1"} NaN\n'
        'decice_node_cpu{node="node-2"} +Inf\n'
        'decice_node_cpu{node="node-3"} 0.5\n'
    )
    # Prometheus stores the NaN sample; VictoriaMetrics drops a NaN when it ingests it, so
    # node-1 has no series there at all. Its line came in the same scrape as the other
    # two, so once they are visible, node-1 would be too.
    stored = {"prometheus": {"node-1", "node-2", "node-3"}, "victoriametrics": {"node-2", "node-3"}}
    nodes = stored[backend.kind]
    result = backend.wait_for("decice_node_cpu", lambda r: set(values_by(r, "node")) == nodes)
    got = values_by(result, "node")
    if backend.kind == "prometheus":
        assert math.isnan(got["node-1"])
    else:
        assert backend.query('decice_node_cpu{node="node-1"}') == []
        assert backend.query('absent(decice_node_cpu{node="node-1"})') != []
    assert got["node-2"] == math.inf
    assert got["node-3"] == 0.5

    # a failing scrape marks the target's series stale: they vanish
    exporter.serve_raw("boom", status=500)
    backend.wait_for("decice_node_cpu", lambda r: not r, timeout=30)
    backend.wait_for(
        'up{job="fake-exporter"}', lambda r: values_by(r, "job") == {"fake-exporter": 0.0}
    )


def test_wait_for_times_out_with_last_result(backend: MetricsServer) -> None:
    with pytest.raises(AssertionError, match="last result"):
        backend.wait_for("vector(1)", lambda r: False, timeout=0.6)
