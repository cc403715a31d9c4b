"""Server-Timing on every verb, and `bench.py --quick --json` writes every key (no timings
are asserted: the numbers belong in BENCHMARKS.md, not in a pass/fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from extender.service import build_service
from tests.benchmarks.bench import KEYS
from tests.conftest import fixture_bytes, make_settings

ROOT = Path(__file__).resolve().parents[1]
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


def test_bench_quick_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    assert set(data["rss_mb"]) >= {"idle", "warm", "after", "requests_since_warm"}
    assert data["rss_mb"]["idle"] > 0
    assert data["rss_mb"]["after"] > 0
    rows = data["results"]
    assert {(r["verb"], r["form"]) for r in rows} == {
        (v, f) for v in ("filter", "prioritize") for f in ("names", "nodes")
    }
    for row in rows:
        assert set(KEYS) <= set(row), set(KEYS) - set(row)
        assert row["nodes"] == 100
        assert row["answer_hosts"] == 100  # the benchmark's snapshot passes every node
        assert row["answer_bytes"] > 0
        for key in ("server_p50_ms", "rtt_p50_ms", "floor_orjson_ms", "floor_echo_ms"):
            assert row[key] > 0, key
    assert "r_orjson" in run.stdout  # the readable table
