"""Scenarios x seeds x schedulers: the whole comparison.

Every scheduler of one (scenario, seed) gets the same scenario object, so they all see the
same nodes, background and pods; each has its own tie-breaking RNG (`select-host:<seed>`),
so none borrows another's luck. Fresh schedulers (and a fresh engine) per run: no state
leaks between runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.policy.settings import Settings
from extender.simulation.profiles import DECICE, KUBE_SCHEDULER, SCHEDULERS, build
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult, simulate
from extender.simulation.scenarios import SCENARIOS, Size


@dataclass(frozen=True, slots=True)
class Plan:
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    seeds: tuple[int, ...] = (1,)
    size: Size = field(default_factory=Size)
    pipeline: Pipeline = field(default_factory=Pipeline)
    max_hosts: int | None = None
    """prioritize.maxHosts for our extender; None keeps the policy's."""
    weight: int = DEFAULT_WEIGHT
    """The extender's `weight` in the scheduler config (the shipped one by default)."""
    cpu_metric: str = "cpu"
    """The policy's metric that gets node CPU utilisation."""
    schedulers: tuple[str, ...] = SCHEDULERS

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios if s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenarios {unknown} (known: {', '.join(SCENARIOS)})")
        if not self.seeds:
            raise ValueError("no seeds")
        strangers = [s for s in self.schedulers if s not in SCHEDULERS]
        if strangers:
            raise ValueError(f"unknown schedulers {strangers} (known: {', '.join(SCHEDULERS)})")
        if not self.schedulers:
            raise ValueError("no schedulers")


@dataclass(frozen=True, slots=True)
class Runs:
    """One scenario and seed, under every scheduler of the plan (in the plan's order)."""

    seed: int
    results: Mapping[str, RunResult]

    def __getitem__(self, name: str) -> RunResult:
        return self.results[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    @property
    def baseline(self) -> RunResult:
        return self.results[KUBE_SCHEDULER]

    @property
    def ours(self) -> RunResult:
        return self.results[DECICE]


def with_max_hosts(settings: Settings, max_hosts: int | None) -> Settings:
    """The policy with `prioritize.maxHosts` set (0: every host, as if unset); None: as
    the policy has it. Its other prioritize settings (the shortlist) are kept."""
    if max_hosts is None:
        return settings
    value = settings.prioritize.model_copy(update={"max_hosts": max_hosts or None})
    return settings.model_copy(update={"prioritize": value})


def run_scenario(settings: Settings, plan: Plan, scenario_name: str, seed: int) -> Runs:
    scenario = SCENARIOS[scenario_name](seed, plan.size)
    policy = with_max_hosts(settings, plan.max_hosts)
    refresh = plan.pipeline.refresh_interval
    results = {}
    for name in plan.schedulers:
        scheduler = build(name, seed, policy, plan.weight, plan.cpu_metric, refresh)
        results[name] = simulate(scenario, scheduler, plan.pipeline)
    return Runs(seed, results)


def run_plan(
    settings: Settings,
    plan: Plan,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, list[Runs]]:
    """scenario -> one Runs per seed, in the plan's order."""
    out: dict[str, list[Runs]] = {}
    for name in plan.scenarios:
        runs: list[Runs] = []
        for seed in plan.seeds:
            if progress is not None:
                progress(name, seed)
            runs.append(run_scenario(settings, plan, name, seed))
        out[name] = runs
    return out


def seeds_from(first: int, count: int) -> Sequence[int]:
    return tuple(range(first, first + count))
