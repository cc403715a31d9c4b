"""`burst.py --quick --json` and `bindload.py --quick --json` write every key, and their
counts add up (no timings asserted: the numbers belong in BENCHMARKS.md, not in a
pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.bindload import QUICK as BINDLOAD
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


def test_bindload_quick_writes_both_cases_and_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "bindload.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bindload", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    assert [(r["nodes"], r["bind"]) for r in data["rounds"]] == [(50, "on"), (50, "off")]
    for row in data["rounds"]:
        assert (row["placed"], row["bind_errors"], row["misplaced"]) == (BINDLOAD.pods, 0, 0)
        for verb in ("filter", "prioritize"):
            assert 0 < row[f"{verb}_server_p50"] <= row[f"{verb}_server_p99"]
            assert row[f"{verb}_server_p50"] <= row[f"{verb}_rtt_p50"]
    on, off, ratio = data["medians"]
    assert ratio["bind"] == "on/off"
    p99 = "filter_server_p99"
    assert ratio[p99] == round(on[p99] / off[p99], 2)
    assert "bind on / off, p99" in run.stdout
