"""Every row of a replay: the real placements and each scheduler model, on `jobs` cores.

The runs share nothing but the History, which they only read; with more than one job
they run in forked worker processes that inherit it (its arrays are never written, so the
pages stay shared), the longest runs first, and hand back their RunResult.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

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


_work: Work | None = None
"""What a forked worker inherits (set before the pool forks)."""


def one(name: str, work: Work | None = None) -> tuple[RunResult, float]:
    """One row's run and the CPU seconds it took."""
    w = work if work is not None else _work
    assert w is not None, "no work handed to the worker"
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
    done: dict[str, RunResult] = {}
    spent = cpu if cpu is not None else {}
    if jobs <= 1:
        for name in names:
            progress(len(done) / len(names))
            done[name], spent[name] = one(name, work)
    else:
        global _work
        _work = work
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(jobs, mp_context=context) as pool:
                first = [n for n in LONGEST_FIRST if n in names]
                futures = {pool.submit(one, name): name for name in first}
                for future in as_completed(futures):
                    name = futures[future]
                    done[name], spent[name] = future.result()
                    progress(len(done) / len(names))
        finally:
            _work = None
    progress(1.0)
    return {name: done[name] for name in names}
