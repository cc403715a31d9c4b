"""Runs into figures over seeds: per scenario, scheduler and metric, a mean and spread."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from extender.simulation.experiment import Runs
from extender.simulation.profiles import DECICE, KUBE_SCHEDULER


@dataclass(frozen=True, slots=True)
class Spread:
    mean: float
    sd: float  # sample standard deviation over seeds
    low: float
    high: float
    values: tuple[float, ...]


def spread(values: Sequence[float]) -> Spread:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Spread(mean, sd, min(values), max(values), tuple(values))


@dataclass(frozen=True, slots=True)
class ScenarioReport:
    name: str
    description: str
    seeds: tuple[int, ...]
    schedulers: Mapping[str, Mapping[str, Spread]]
    """scheduler -> Metrics field -> its spread, in the plan's order."""
    unplaced_only: Mapping[str, int]
    """scheduler -> pods kube-scheduler placed and it left unplaced, over seeds."""
    overcommitted: int

    @property
    def baseline(self) -> Mapping[str, Spread] | None:
        return self.schedulers.get(KUBE_SCHEDULER)

    @property
    def ours(self) -> Mapping[str, Spread] | None:
        return self.schedulers.get(DECICE)


def scenario_report(name: str, description: str, runs: Sequence[Runs]) -> ScenarioReport:
    names = list(runs[0])
    rows = {s: [asdict(r[s].metrics) for r in runs] for s in names}
    schedulers = {s: {k: spread([float(r[k]) for r in rows[s]]) for k in rows[s][0]} for s in names}
    others = [s for s in names if s != KUBE_SCHEDULER] if KUBE_SCHEDULER in names else []
    only = {s: sum(len(r[s].unplaced - r[KUBE_SCHEDULER].unplaced) for r in runs) for s in others}
    return ScenarioReport(
        name=name,
        description=description,
        seeds=tuple(r.seed for r in runs),
        schedulers=schedulers,
        unplaced_only=only,
        overcommitted=sum(r[s].overcommitted for r in runs for s in names),
    )
