"""Every row of a replay: the real placements and each scheduler model, on `jobs` cores.

The runs share nothing but the History, which they only read; with more than one job
they run in forked worker processes that inherit it (its arrays are never written, so the
pages stay shared), the longest runs first, and hand back their RunResult. `fork_map` is
that pool for any such work: `decice-extender simulate --jobs` runs its scenarios and
seeds on it too.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from extender.policy.settings import Settings
from extender.replay.driver import replay
from extender.replay.model import History
from extender.replay.models import REAL, SCHEDULERS, Options, build
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult

LONGEST_FIRST = (*SCHEDULERS[1:], SCHEDULERS[0], REAL)
"""Our extender and the peers read metrics each tick: they take longest."""


@dataclass(frozen=True, slots=True)
class Work:
    history: History
    settings: Settings
    options: Options
    pipeline: Pipeline


K = TypeVar("K", bound=Hashable)
P = TypeVar("P")
R = TypeVar("R")

_inherited: Any = None
"""What forked workers inherit (set before the pool forks): fork_map's payload."""


def _call(task: Callable[[K, Any], R], key: K) -> R:
    return task(key, _inherited)


def fork_map(
    task: Callable[[K, P], R],
    payload: P,
    keys: Sequence[K],
    jobs: int,
    finished: Callable[[K, R], None] = lambda key, result: None,
) -> dict[K, R]:
    """key -> task(key, payload) for every key, in `keys`' order. With `jobs` > 1 the calls
    run in that many forked processes, started in `keys`' order (put the longest first),
    which inherit `payload` (never pickled; `task` must be a module-level function);
    `finished` hears of each as it ends. The results are the same whatever `jobs` is, as
    long as `task` depends on its arguments only."""
    done: dict[K, R] = {}
    if jobs <= 1:
        for key in keys:
            done[key] = task(key, payload)
            finished(key, done[key])
    else:
        global _inherited
        _inherited = payload
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(jobs, mp_context=context) as pool:
                futures = {pool.submit(_call, task, key): key for key in keys}
                for future in as_completed(futures):
                    key = futures[future]
                    done[key] = future.result()
                    finished(key, done[key])
        finally:
            _inherited = None
    return {key: done[key] for key in keys}


def one(name: str, w: Work) -> tuple[RunResult, float]:
    """One row's run and the CPU seconds it took."""
    began = time.process_time()
    model = None if name == REAL else build(name, w.settings, w.options)
    return replay(w.history, model, w.pipeline, w.options.seed), time.process_time() - began


def run_all(
    work: Work,
    jobs: int,
    progress: Callable[[float], None],
    models: Sequence[str] = SCHEDULERS,
    cpu: dict[str, float] | None = None,
) -> dict[str, RunResult]:
    """Row name -> its run, the real placements first, then `models` in report order;
    `cpu`, when given, gets each row's CPU seconds."""
    names = [REAL, *(m for m in SCHEDULERS if m in models)]
    spent = cpu if cpu is not None else {}
    ended: list[str] = []
    progress(0.0)

    def finished(name: str, result: tuple[RunResult, float]) -> None:
        spent[name] = result[1]
        ended.append(name)
        progress(len(ended) / len(names))

    first = [n for n in LONGEST_FIRST if n in names] if jobs > 1 else names
    runs = fork_map(one, work, first, jobs, finished)
    progress(1.0)
    return {name: runs[name][0] for name in names}
