"""Scenarios x seeds x {kube-scheduler alone, with our extender}: the whole comparison.

Both schedulers of one (scenario, seed) get the same scenario object, so they see the same
nodes, background and pods; each has its own tie-breaking RNG (`select-host:<seed>`), so
neither borrows the other's luck. A fresh engine per run: no state leaks between runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from extender.policy.sections import PrioritizeSettings
from extender.policy.settings import Settings
from extender.simulation.ours import OurExtender
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import EPOCH, RunResult, simulate
from extender.simulation.scenarios import SCENARIOS, Size
from extender.simulation.scheduler import KubeScheduler


@dataclass(frozen=True, slots=True)
class Plan:
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    seeds: tuple[int, ...] = (1,)
    size: Size = field(default_factory=Size)
    pipeline: Pipeline = field(default_factory=Pipeline)
    max_hosts: int | None = None
    """prioritize.maxHosts for our extender; None keeps the policy's."""
    weight: int = 1
    """The extender's `weight` in the scheduler config."""
    cpu_metric: str = "cpu"
    """The policy's metric that gets node CPU utilisation."""

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios if s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenarios {unknown} (known: {', '.join(SCENARIOS)})")
        if not self.seeds:
            raise ValueError("no seeds")


@dataclass(frozen=True, slots=True)
class Pair:
    """One scenario and seed, under both schedulers."""

    baseline: RunResult
    ours: RunResult


def with_max_hosts(settings: Settings, max_hosts: int | None) -> Settings:
    """The policy with `prioritize.maxHosts` set (0: every host, as if unset)."""
    if max_hosts is None:
        return settings
    value = PrioritizeSettings(max_hosts=max_hosts or None)
    return settings.model_copy(update={"prioritize": value})


def run_pair(settings: Settings, plan: Plan, scenario_name: str, seed: int) -> Pair:
    scenario = SCENARIOS[scenario_name](seed, plan.size)
    baseline = KubeScheduler(random.Random(f"select-host:{seed}"))
    ours = KubeScheduler(
        random.Random(f"select-host:{seed}"),
        OurExtender(with_max_hosts(settings, plan.max_hosts), EPOCH, plan.cpu_metric),
        plan.weight,
    )
    return Pair(
        baseline=simulate(scenario, baseline, plan.pipeline),
        ours=simulate(scenario, ours, plan.pipeline),
    )


def run_plan(
    settings: Settings,
    plan: Plan,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, list[Pair]]:
    """scenario -> one Pair per seed, in the plan's order."""
    out: dict[str, list[Pair]] = {}
    for name in plan.scenarios:
        pairs: list[Pair] = []
        for seed in plan.seeds:
            if progress is not None:
                progress(name, seed)
            pairs.append(run_pair(settings, plan, name, seed))
        out[name] = pairs
    return out


def seeds_from(first: int, count: int) -> Sequence[int]:
    return tuple(range(first, first + count))
