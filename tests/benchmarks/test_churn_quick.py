"""`churn.py --quick --json` runs the pod watch on and off against the real API server and
writes every key; with the watch on, its filter drops the status updates of the pods placed
by another scheduler (counts, never a timing: the numbers belong in BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.churn import QUICK, RUN_KEYS, VARIANTS
from tests.harness.controlplane import unavailable_reason

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_churn_quick_writes_every_key_and_the_watch_drops_what_it_does_not_use(
    tmp_path: Path,
) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "churn.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.churn", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["variants"] == list(VARIANTS)
    rows = {row["variant"]: row for row in data["runs"]}
    for row in rows.values():
        assert set(RUN_KEYS) <= set(row), set(RUN_KEYS) - set(row)
        assert row["updates"] == int(QUICK.rate * QUICK.seconds)
        for phase in ("churn", "quiet"):
            assert row[phase]["filter_calls"] > 0 and row[phase]["prioritize_calls"] > 0
        assert row["churn"]["cpu_ms_per_1000"] >= 0
    # Watch on: every update of a pod placed long ago was dropped undecoded (two churn
    # phases), none reached the handler. Watch off: no pod watch at all.
    on = rows["on"]
    assert on["watch_dropped"] >= on["updates"] + on["churn"]["updates"]
    assert on["watch_events"] == 0
    assert rows["off"]["watch_dropped"] is None
    assert "on / off" in data["ratios"] and "on / off" in run.stdout
