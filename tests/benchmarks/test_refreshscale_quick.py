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

from tests.benchmarks.refreshscale import (
    BACKENDS,
    CONTAINER_CPU,
    CONTAINER_CPU_NOW,
    MODES,
    POD_CREATED,
    POD_OWNER,
    PODS_PER_WORKLOAD,
    cluster,
    fleet,
    history,
    openmetrics,
    series,
    usage_series,
)

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


def test_the_pods_series_are_the_stock_rules_ones() -> None:
    """Per pod: the per-container CPU rule, the pod -> workload rule and kube-state-metrics'
    creation time, labelled as kube-prometheus-stack records them; Deployments of
    PODS_PER_WORKLOAD pods; every pod young (created within the last minute); seeded."""
    c = cluster(3)
    f = fleet(c, 100)
    assert fleet(c, 100) == f
    assert len(f) == 100 and f.workloads == 100 // PODS_PER_WORKLOAD
    assert set(f.node) <= set(c.names) and all(0 <= a <= 60 for a in f.age)
    now = 1_000_000.0
    rows = usage_series(f, now)
    names = [CONTAINER_CPU, CONTAINER_CPU_NOW, POD_OWNER, POD_CREATED]
    assert [name for name, _, _ in rows[:4]] == names
    ns, pod, node, workload = f.namespace[0], f.pod[0], f.node[0], f.workload[0]
    container = f'{{namespace="{ns}",pod="{pod}",container="main",node="{node}"}}'
    assert rows[0][1] == rows[1][1] == container
    assert rows[2][1] == (
        f'{{namespace="{ns}",pod="{pod}",workload="{workload}",workload_type="deployment"}}'
    )
    assert rows[3][1].startswith('{job="kube-state-metrics",')
    assert now - 61 <= rows[3][2] <= now
    text = history(c, f, now)
    assert text.count("# EOF") == 1 and text.endswith("# EOF\n")
    # 9 node series x 5 samples, 400 pod series x 2 samples, 7 TYPE lines and EOF.
    assert text.count("\n") == 9 * 5 + 400 * 2 + 7 + 1


def test_refreshscale_quick_prints_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "refreshscale.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.benchmarks.refreshscale",
            "--quick",
            "--unfrozen",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    titles = (
        "One refresh of both metrics",
        "The pods' measured use",
        "What the event loop would wait",
        "/prioritize",
    )
    for title in titles:
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
        # The usage queries answered for every pod and workload, and were timed apart.
        assert (row["pods"], row["young_pods"], row["workloads"]) == (1000, 1000, 40)
        assert 0 < row["usage_wire_bytes"] < row["usage_body_bytes"]
        assert row["usage_ms"] > 0 and row["refresh_off_ms"] > 0
    assert [(r["backend"], r["mode"]) for r in data["loads"]] == [
        (b, m) for b in BACKENDS for m in (*MODES, "refreshing_unfrozen")
    ]
    assert all(r["requests"] > 0 and r["names"] > 0 for r in data["loads"])
    assert all("u_server_p99_ms" in r for r in data["loads"] if r["mode"] == "refreshing_usage")
    assert {f"{b} 50" for b in BACKENDS} == set(data["profiles"])
