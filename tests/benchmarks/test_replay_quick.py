"""`replay.py --quick` end to end (20 nodes, 400 pods, a day, through the fake server and
the command), and the fake's answers on their own. It asserts that it ran and what it
printed, never a time: the week's figure belongs in BENCHMARKS.md, measured on a quiet
machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.replay import STEP, answer, build

ROOT = Path(__file__).resolve().parents[2]


def test_the_week_is_seeded_and_its_answers_are_what_the_replay_reads() -> None:
    week = build(5, 40, 0.5)
    again = build(5, 40, 0.5)
    assert [(p.name, p.node, p.created) for p in week.pods] == [
        (p.name, p.node, p.created) for p in again.pods
    ]
    assert len(week.pods) == 40 and len(week.nodes) == 5
    params = {"start": str(week.start), "end": str(week.start + 10 * STEP), "step": f"{STEP}s"}
    cpu = answer(week, "max by (node) (instance:node_cpu_utilisation:rate5m)", params)
    assert len(cpu) == 5 and all(len(s["values"]) == 11 for s in cpu)
    assert all(0 <= float(v) <= 1 for s in cpu for _, v in s["values"])
    windows = {**params, "step": "300s", "end": str(week.end)}
    info = answer(week, "max by (namespace, pod, uid, node, created_by_kind) "
                  "(count_over_time(kube_pod_info[300s]))", windows)  # fmt: skip
    assert {s["metric"]["pod"] for s in info} == {p.name for p in week.pods}


def test_replay_quick_prints_its_figure(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    run = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.replay", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "node-minutes above 90% CPU" in run.stdout
    assert "replay of 1 days, 20 nodes, 400 pods at step 30s, 2 jobs" in run.stdout
    figures = json.loads(out.read_text())
    assert figures["nodes"] == 20 and figures["pods"] == 400
    assert figures["seconds"] > 0 and figures["peak_mib"] > 0
    # The estimate the command checks --max-memory against holds what it and its workers
    # took together (each worker's peak counts the pages it shares with the command).
    assert figures["peak_mib"] + (figures["worker_peak_mib"] or 0) <= figures["estimated_mib"]
