"""tests/harness/workers.py: a lock another process cannot take while it is held, and an
answer made once per run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.workers import file_lock, once_per_run

#: Exit 0 if it took the lock on argv[1] at once, 1 if someone holds it.
TRY_LOCK = """
import fcntl, sys
with open(sys.argv[1], "a") as handle:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(1)
"""


def taken_by_another_process(path: Path) -> bool:
    run = subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], timeout=60, check=False)
    assert run.returncode in (0, 1), run
    return run.returncode == 1


def test_a_held_lock_is_refused_to_another_process_and_free_after(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "unpack.lock"
    with file_lock(path):
        assert taken_by_another_process(path)
    assert not taken_by_another_process(path)


def test_once_per_run_makes_once_and_a_failure_leaves_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    made: list[str] = []

    def fail() -> str:
        raise RuntimeError("the build failed")

    def make() -> str:
        made.append("tag")
        return "localhost/thing:1"

    with pytest.raises(RuntimeError, match="the build failed"):
        once_per_run(tmp_path_factory, "test-workers-thing", fail)
    assert once_per_run(tmp_path_factory, "test-workers-thing", make) == "localhost/thing:1"
    assert once_per_run(tmp_path_factory, "test-workers-thing", fail) == "localhost/thing:1"
    assert made == ["tag"]
