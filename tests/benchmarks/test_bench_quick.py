"""Server-Timing on every verb, and `bench.py --quick --json` writes every key (no timings
are asserted: the numbers belong in BENCHMARKS.md, not in a pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.service.compose import build_service
from tests.benchmarks.bench import KEYS
from tests.harness.fixtures import fixture_bytes, make_settings

ROOT = Path(__file__).resolve().parents[2]
JSON = {"Content-Type": "application/json"}
BODIES = {
    "filter": "filter-nodecache.json",
    "prioritize": "prioritize-nodecache.json",
    "bind": "bind.json",
    "preempt": "preempt-nodecache.json",
}


def server_ms(value: str) -> float:
    name, _, dur = value.partition(";")
    assert name == "app"
    assert dur.startswith("dur=")
    ms = float(dur.removeprefix("dur="))
    assert 0 <= ms < 60_000
    return ms


@pytest.mark.parametrize("verb", list(BODIES))
def test_server_timing_on_every_verb_and_every_outcome(verb: str) -> None:
    cpu = {f"node-{i}": 0.1 * i for i in range(1, 6)}
    settings = make_settings(static={"nodes": {n: {"cpu": v} for n, v in cpu.items()}})
    with TestClient(build_service(settings).app) as client:
        ok = client.post(f"/{verb}", content=fixture_bytes(BODIES[verb]), headers=JSON)
        bad = client.post(f"/{verb}", content=b"{", headers=JSON)
        wrong_type = client.post(f"/{verb}", content=b"{}", headers={"Content-Type": "text/plain"})
    assert ok.status_code == 200  # bind without Kubernetes answers 200 with an Error
    assert (bad.status_code, wrong_type.status_code) == (400, 415)
    for response in (ok, bad, wrong_type):
        server_ms(response.headers["Server-Timing"])
    orjson.loads(ok.content)


def bench_quick(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """`bench --quick --json FILE ARGS...`: (the JSON written, stdout)."""
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench", "--quick", "--json", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data, run.stdout


def check_rows(rows: list[dict[str, Any]], forms: tuple[str, ...], policies: int) -> None:
    assert {(r["verb"], r["form"]) for r in rows} == {
        (v, f) for v in ("filter", "prioritize") for f in forms
    }
    for row in rows:
        assert set(KEYS) <= set(row), set(KEYS) - set(row)
        assert row["nodes"] == 100
        assert row["policies"] == policies
        assert row["answer_hosts"] == 100  # the benchmark's snapshot passes every node
        assert row["answer_bytes"] > 0
        for key in ("server_p50_ms", "rtt_p50_ms", "floor_orjson_ms", "floor_echo_ms"):
            assert row[key] > 0, key


def test_bench_quick_writes_every_key(tmp_path: Path) -> None:
    data, stdout = bench_quick(tmp_path)
    assert set(data["rss_mb"]) >= {"idle", "warm", "after", "requests_since_warm"}
    assert data["rss_mb"]["idle"] > 0
    assert data["rss_mb"]["after"] > 0
    assert (data["policies"], data["policy_named"], data["policy_hosts"]) == (1, None, {})
    check_rows(data["results"], ("names", "nodes"), 1)
    assert "r_orjson" in stdout  # the readable table
    assert "policies: 1 " in stdout


def test_bench_quick_named_policies(tmp_path: Path) -> None:
    """--policies 3: three tables, the measured pod naming p3 (not the default); before
    measuring the benchmark checks each policy answers every node and p3 is not p1."""
    data, stdout = bench_quick(tmp_path, "--policies", "3", "--forms", "names")
    assert (data["policies"], data["policy_named"]) == (3, "p3")
    assert data["policy_hosts"] == {"100": {"p1": 100, "p2": 100, "p3": 100}}
    check_rows(data["results"], ("names",), 3)
    assert "policies: 3 (p1..p3, default p1; the pod names p3)" in stdout
