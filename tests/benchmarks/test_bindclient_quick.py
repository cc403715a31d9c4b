"""`bindclient.py --quick --json` binds through our client on the real API server, in a
process of its own, and writes every key (counts, never a timing: the numbers belong in
BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.bindclient import RUN_KEYS
from tests.harness.controlplane import unavailable_reason

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_bindclient_quick_binds_through_our_client(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "binds.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bindclient", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [r["variant"] for r in data["runs"]] == ["ours"]
    for row in data["runs"]:
        assert set(RUN_KEYS) <= set(row)
        assert row["binds"] == 20 and row["cpu_us_per_bind"] > 0
    assert data["summary"]["ours"]["median"] > 0
