"""`decice-extender simulate --jobs N`: the runs (a scenario and seed each) on N processes
of replay's pool, with a count and an ETA on stderr; the same report whatever N is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extender.cli.main import main
from extender.cli.simulate import CORES

TINY = ["--quick", "--nodes", "8", "--warmup", "5", "--duration", "15", "--burst", "20"]
PLAN = [*TINY, "--scenario", "uniform", "--scenario", "burst", "--seeds", "2"]


def test_one_job_and_two_give_the_same_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs-{jobs}.json"
        assert main(["simulate", *PLAN, "--jobs", jobs, "--json", str(out)]) == 0
        printed = capsys.readouterr()
        outputs[jobs] = (json.loads(out.read_text()), printed.out)
        # the progress line: a count of the 4 runs (2 scenarios x 2 seeds), done
        assert "4/4" in printed.err and "simulating: 100%" in printed.err, printed.err
        assert f"({jobs} jobs)" in printed.err
    assert outputs["1"] == outputs["2"]
    report = outputs["1"][0]
    assert list(report["scenarios"]) == ["uniform", "burst"]


def test_jobs_default_to_the_cores_and_zero_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert CORES >= 1
    assert main(["simulate", *TINY, "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
