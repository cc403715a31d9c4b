"""`decice-extender simulate`: the table, the JSON, the plots, and the same numbers in
another process (string hashing differs between processes; the numbers must not)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from extender.cli.main import main
from extender.cli.simulate import plot, pyplot_or_say_why
from extender.policy.loading import load_settings
from extender.simulation.experiment import Plan, run_plan
from extender.simulation.profiles import SCHEDULERS
from extender.simulation.scenarios import SCENARIOS, Size

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
TINY = ["--quick", "--nodes", "8", "--warmup", "5", "--duration", "15", "--burst", "20"]


def test_quick_prints_the_table_and_writes_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert main(["simulate", *TINY, "--seeds", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("decice-extender simulate: 8 nodes, 2 seeds (1..2), mean ± sd")
    for name in SCENARIOS:
        assert f"\n{name}: " in text
    assert "node-minutes above 90% CPU" in text
    for heading in ("kube-scheduler", "decice", "trimaran-tlp", "trimaran-lvrb", "koordinator"):
        assert heading in text
    assert "targets:" in text
    assert "maxHosts all" in text  # the shipped policy leaves prioritize.maxHosts unset
    assert "raw rate window 60s" in text
    doc = json.loads(out.read_text())
    assert list(doc["scenarios"]) == list(SCENARIOS)
    assert len(SCENARIOS) >= 7
    assert doc["plan"]["size"]["nodes"] == 8 and doc["plan"]["seeds"] == [1, 2]
    assert doc["plan"]["pipeline"]["refresh_interval"] == 15  # the shipped policy's interval
    assert doc["plan"]["schedulers"] == list(SCHEDULERS)
    assert set(doc["scenarios"]["burst"]["schedulers"]) == set(SCHEDULERS)
    # per scenario: no more than the peers; halved but uniform; uniform; nobody left behind
    assert len(doc["targets"]) == 3 * len(SCENARIOS) + 1
    assert doc["plan"]["maxHosts"] == 0


def test_options_reach_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    args = [*TINY, "--scenario", "burst", "--max-hosts", "3", "--rule-interval", "15"]
    args += ["--scheduler", "decice", "--scheduler", "kube-scheduler", "--fast-window", "0"]
    assert main(["simulate", *args, "--config", str(SHIPPED), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    plan = doc["plan"]
    assert plan["scenarios"] == ["burst"] and plan["maxHosts"] == 3
    assert plan["pipeline"]["rule_interval"] == 15 and plan["pipeline"]["fast_window"] == 0
    assert plan["schedulers"] == ["decice", "kube-scheduler"]
    assert list(doc["scenarios"]["burst"]["schedulers"]) == ["decice", "kube-scheduler"]
    text = capsys.readouterr().out
    assert "maxHosts 3" in text and "no raw rate" in text and "koordinator" not in text


def test_a_bad_pipeline_or_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *TINY, "--rate-window", "20"]) == 2
    assert "rate_window" in capsys.readouterr().err
    assert main(["simulate", *TINY, "--nodes", "0"]) == 2
    assert "nodes must be at least 1" in capsys.readouterr().err
    assert main(["simulate", *TINY, "--fast-window", "10"]) == 2
    assert "fast_window" in capsys.readouterr().err


def test_plot_without_matplotlib_says_how_to_get_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(name: str) -> ModuleType:
        raise ImportError(f"No module named {name!r}")

    assert pyplot_or_say_why("simulate", missing) is None
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "decice-extender[plot]" in err
    if importlib.util.find_spec("matplotlib") is None:  # the real thing, before simulating
        assert main(["simulate", *TINY, "--plot", str(tmp_path / "plots")]) == 1
        assert "--plot needs matplotlib" in capsys.readouterr().err
        assert not (tmp_path / "plots").exists()


def test_plot_draws_a_png_per_scenario(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    pyplot = pyplot_or_say_why("simulate")
    plan = Plan(scenarios=("hot-node",), size=Size(nodes=4, warmup=120.0, duration=300.0))
    results = run_plan(load_settings(SHIPPED), plan)
    plot(results, tmp_path, plan.size.warmup, pyplot)
    assert (tmp_path / "hot-node.png").read_bytes().startswith(b"\x89PNG")
    one = Plan(scenarios=("uniform",), size=plan.size, schedulers=("decice",))
    plot(run_plan(load_settings(SHIPPED), one), tmp_path, plan.size.warmup, pyplot)
    assert (tmp_path / "uniform.png").is_file()


def test_another_process_gets_the_same_numbers(tmp_path: Path) -> None:
    docs = []
    for hashseed in ("1", "2"):
        out = tmp_path / f"r{hashseed}.json"
        args = [*TINY, "--scenario", "burst", "--scenario", "misrequested", "--json", str(out)]
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        run = subprocess.run(
            [sys.executable, "-m", "extender", "simulate", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        docs.append(json.loads(out.read_text()))
    assert docs[0] == docs[1]
