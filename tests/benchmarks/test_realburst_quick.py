"""`realburst.py --quick --json` runs every variant on the real control plane, binds every
pod and writes every key (no timings asserted: the numbers belong in BENCHMARKS.md, not
in a pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.realburst import (
    QUICK,
    RATIO_KEYS,
    RUN_KEYS,
    SUMMARY_KEYS,
    VARIANTS,
    Histogram,
)
from tests.harness.controlplane import unavailable_reason

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_histogram_quantiles_interpolate_inside_buckets() -> None:
    # 10 observations: 2 up to 1 ms, 6 in (1, 2] ms, 2 in (2, 4] ms.
    h = Histogram(
        buckets=((0.001, 2), (0.002, 8), (0.004, 10), (float("inf"), 10)), total=0.02, count=10
    )
    assert h.mean == pytest.approx(0.002)
    assert h.quantile(0.5) == pytest.approx(0.0015)  # rank 5: half way through (1, 2]
    assert h.quantile(0.1) == pytest.approx(0.0005)  # rank 1 of 2 in [0, 1]
    assert h.quantile(0.99) == pytest.approx(0.0039)
    tail = Histogram(buckets=((0.001, 0), (float("inf"), 3)), total=3.0, count=3)
    assert tail.quantile(0.5) == 0.001  # in +Inf: the highest finite bound
    assert Histogram(buckets=(), total=0, count=0).quantile(0.5) is None


def test_realburst_quick_binds_every_pod_and_writes_every_key(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "realburst.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.realburst", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["quick"] is True
    assert data["sizes"] == {"nodes": QUICK.nodes, "pods": QUICK.pods, "runs": QUICK.runs}
    assert data["variants"] == list(VARIANTS)
    assert set(data["machine"]) >= {"nproc", "cpu"}
    assert set(data["versions"]) == {"kube-apiserver", "kube-scheduler"}

    extenders = data["extenders"]
    assert extenders["ours-bind"]["bindVerb"] == "bind"
    for variant in ("ours-nobind", "donothing"):
        assert "bindVerb" not in extenders[variant]
    for entry in extenders.values():
        assert entry["filterVerb"] and entry["prioritizeVerb"] and entry["nodeCacheCapable"]

    assert [(r["variant"], r["run"]) for r in data["runs"]] == [(v, 1) for v in VARIANTS]
    for row in data["runs"]:
        assert set(RUN_KEYS) <= set(row), set(RUN_KEYS) - set(row)
        pods = QUICK.pods
        assert (row["nodes"], row["pods"]) == (QUICK.nodes, pods)
        assert row["pods_bound"] == row["bound_seen"] == pods
        assert row["attempts_by_result"].get("scheduled") == pods
        assert row["attempts"] >= pods and row["algorithm_count"] >= pods
        assert row["pending_after"] == 0
        assert 1 <= row["max_pods_per_node"] <= pods and 1 <= row["nodes_used"] <= QUICK.nodes
        assert isinstance(row["algorithm_ms_per_attempt"], float)
        assert {"kube-scheduler", "kube-apiserver", "etcd", "extender"} <= set(row["cpu_s"])
        requests = row["extender_requests"]
        if row["variant"].startswith("ours-"):
            assert requests["filter"] >= pods
            assert requests["bind"] == (pods if row["variant"] == "ours-bind" else 0)
        if row["variant"] == "ours-bind":
            assert requests["prioritize"] >= pods
        # ours-nobind: while the pods it counts are not seen bound, the filter passes one
        # node, and kube-scheduler skips scoring a single feasible node

    assert list(data["summary"]) == list(VARIANTS)
    for cells in data["summary"].values():
        assert set(SUMMARY_KEYS) <= set(cells), set(SUMMARY_KEYS) - set(cells)
        assert cells["pods_bound"]["min"] == QUICK.pods
    assert set(data["ratios"]) == {"ours-bind / donothing", "ours-nobind / donothing"}
    for cells in data["ratios"].values():
        assert set(cells) == set(RATIO_KEYS)
        assert all(set(c) == {"median_ratio", "paired_min", "paired_max"} for c in cells.values())
    assert "algo ms/attempt" in run.stdout and "ours-bind / donothing" in run.stdout
