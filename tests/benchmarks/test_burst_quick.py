"""`burst.py --quick --json` writes every key, and its counts add up (no timings asserted:
the numbers belong in BENCHMARKS.md, not in a pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.burst import BIND_KEYS, BURST_KEYS, CYCLE_KEYS, QUICK

ROOT = Path(__file__).resolve().parents[2]


def test_burst_quick_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "burst.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.burst", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["quick"] is True
    assert set(data["machine"]) >= {"nproc", "cpu"}

    assert [r["concurrency"] for r in data["bind"]] == [1, 4]
    for row in data["bind"]:
        assert set(BIND_KEYS) <= set(row), set(BIND_KEYS) - set(row)
        assert row["binds"] == QUICK.binds
        assert (row["bind_errors"], row["bind_count_mismatches"]) == (0, 0)
        assert row["cpu_s"] >= 0 and row["binds_per_s"] > 0 and row["rtt_p50_ms"] > 0

    cases = [(r["case"], r["max_hosts"]) for r in data["burst"]]
    assert sorted(cases, key=str) == sorted(
        [(c, m) for c in ("2 our bind", "3 default binder") for m in (None, 10)], key=str
    )
    for row in data["burst"]:
        assert set(BURST_KEYS) <= set(row), set(BURST_KEYS) - set(row)
        if row["binder"] == "default":
            # Case 3 needs the service's pod watch; only its keys are checked here.
            continue
        assert row["pods"] == QUICK.burst_pods
        assert (row["placed"], row["unplaced"]) == (QUICK.burst_pods, 0)
        assert (row["bind_errors"], row["placement_mismatches"]) == (0, 0)
        assert 1 <= row["max_pods_per_node"] <= row["placed"]
        assert 1 <= row["nodes_used"] <= row["nodes"] == QUICK.nodes
        assert row["pods_per_node_p50"] <= row["pods_per_node_p99"] <= row["max_pods_per_node"]
        assert row["pods_on_best_nodes"] <= row["placed"]
    [cycles] = data["cycles"]
    assert set(CYCLE_KEYS) <= set(cycles), set(CYCLE_KEYS) - set(cycles)
    assert (cycles["nodes"], cycles["placed"]) == (QUICK.cycle_nodes, QUICK.cycles)
    assert (cycles["bind_errors"], cycles["placement_mismatches"]) == (0, 0)
    assert cycles["cpu_s_per_1000_cycles"] == round(cycles["cpu_s"] / QUICK.cycles * 1000, 3)
    assert "max/node" in run.stdout and "cpu s per 1,000" in run.stdout  # the readable tables
