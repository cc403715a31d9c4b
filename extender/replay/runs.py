"""Every row of a replay on `jobs` cores, longest first: forked workers share the History
(only read, so its pages stay shared).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from extender.policy.settings import Settings
from extender.replay.driver import replay
from extender.replay.model import History
from extender.replay.models import REAL, SCHEDULERS, Options, build
from extender.simulation.experiment import fork_map
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult

LONGEST_FIRST = (*SCHEDULERS[1:], SCHEDULERS[0], REAL)  # ours and the peers read metrics


@dataclass(frozen=True, slots=True)
class Work:
    history: History
    settings: Settings
    options: Options
    pipeline: Pipeline


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
    """Row name -> its run, the real placements first; `cpu` gets each row's CPU seconds."""
    names = [REAL, *(m for m in SCHEDULERS if m in models)]
    spent = cpu if cpu is not None else {}
    progress(0.0)

    def finished(name: str, result: tuple[RunResult, float]) -> None:
        spent[name] = result[1]
        progress(len(spent) / len(names))

    first = [n for n in LONGEST_FIRST if n in names] if jobs > 1 else names
    runs = fork_map(one, work, first, jobs, finished)
    progress(1.0)
    return {name: runs[name][0] for name in names}
