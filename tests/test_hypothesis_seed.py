"""The dev profile's one seed per run (tests/conftest.py) holds on every xdist worker: the
seed the header prints is the one each worker draws its examples from, so the replay line
printed after a failure draws the same examples again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Run on each worker (--dist each): writes the seed that worker's hypothesis was given.
PROBE = """
import os
from pathlib import Path


def test_probe(request):
    seed = request.config.option.hypothesis_seed
    Path(os.environ["SEEDS"], os.environ["PYTEST_XDIST_WORKER"]).write_text(str(seed))
"""


def test_every_worker_draws_from_the_seed_the_header_prints(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # the dev profile
    config = ["-p", "no:cacheprovider", "-p", "tests.conftest", "-c", str(ROOT / "pyproject.toml")]
    each = ["-n", "2", "--dist", "each"]  # the probe runs on both workers
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *config, "--rootdir", ".", *each, "test_probe.py"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT), "SEEDS": str(seeds)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    header = re.search(r"random examples, seed (\d+) ", run.stdout)
    assert header is not None, run.stdout[-2000:]
    drawn = {path.name: path.read_text() for path in seeds.iterdir()}
    assert drawn == {"gw0": header.group(1), "gw1": header.group(1)}
