"""What the processes of one test run share, made safe for several at once.

scripts/test runs the suite on pytest-xdist workers (`-n`): each worker is a process with
its own session fixtures, temporary folders and free ports. Two things are still one per
machine or per run, and go through here:

    with file_lock(path):             # one process of the machine at a time
        ...
    tag = once_per_run(tmp_path_factory, "image", build)   # built by one worker, shared

`file_lock` is flock(2) on a file of its own, released when the block ends (or the process
dies). `once_per_run` keeps the answer in the folder every worker of the run shares (the
parent of each worker's basetemp), so the others wait for the first and reuse its answer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every worker of this run shares (without xdist: the basetemp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[], str]
) -> str:
    """`make()` once in this run, whichever worker asks first; the others wait and get its
    answer. A `make()` that raises leaves nothing behind: the next to ask tries again."""
    folder = run_folder(tmp_path_factory)
    answer = folder / f"{name}.once"
    with file_lock(folder / f"{name}.lock"):
        if answer.is_file():
            return answer.read_text(encoding="utf-8")
        made = make()
        answer.write_text(made, encoding="utf-8")
        return made
