"""`refreshscale.py --quick` end to end: 50 nodes, one repetition, both backends (a real
Prometheus and a real VictoriaMetrics on 127.0.0.1), the service in its three modes. It
asserts that it ran and printed its tables, never a time (the numbers belong in
BENCHMARKS.md, not in a pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.benchmarks.refreshscale import BACKENDS, MODES, cluster, openmetrics, series

ROOT = Path(__file__).resolve().parents[2]


def test_series_are_the_stock_ones() -> None:
    """Per node: CPU and memory as node-exporter's recording rules label them (no node
    label), and the pod -> node series the stock join reads; seeded, so the same twice."""
    c = cluster(3)
    assert cluster(3) == c
    lines = [f"{name}{labels}" for name, labels, _ in series(c)]
    node, ip = c.names[0], c.ips[0]
    exporter = f'job="node-exporter",instance="{ip}:9100",namespace="monitoring"'
    assert lines[:3] == [
        f'instance:node_cpu_utilisation:rate5m{{{exporter},pod="node-exporter-{node}"}}',
        f'instance:node_memory_utilisation:ratio{{{exporter},pod="node-exporter-{node}"}}',
        'node_namespace_pod:kube_pod_info:{namespace="monitoring",'
        f'pod="node-exporter-{node}",node="{node}"}}',
    ]
    text = openmetrics(c, [1_000, 61_000])
    assert text.endswith("# EOF\n")
    assert text.count("\n") == 3 + 3 * 3 * 2 + 1  # TYPE lines, 9 series x 2 samples, EOF


def test_refreshscale_quick_prints_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "refreshscale.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.refreshscale", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for title in ("One refresh of both metrics", "What the event loop would wait", "/prioritize"):
        assert title in run.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    assert [(r["backend"], r["nodes"]) for r in data["phases"]] == [(b, 50) for b in BACKENDS]
    for row in data["phases"]:
        assert row["series"] == 50  # every node's value arrived and was mapped
        assert row["probe_encoding"] == "gzip"
        # The provider's own answers, read through a hook on its requests session ("?"
        # only if it no longer has one to hook).
        assert row["encoding"] in ("gzip", "?")
        assert 0 < row["wire_bytes"] < row["body_bytes"]
        assert row["refresh_ms"] > 0
    assert [(r["backend"], r["mode"]) for r in data["loads"]] == [
        (b, m) for b in BACKENDS for m in MODES
    ]
    assert all(r["requests"] > 0 and r["names"] > 0 for r in data["loads"])
    assert {f"{b} 50" for b in BACKENDS} == set(data["profiles"])
