"""Scenarios x seeds x schedulers: the whole comparison. Each scheduler of one scenario and
seed gets its own tie-breaking RNG and a fresh engine: no luck or state leaks between runs.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypeVar

from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.policy.settings import Settings
from extender.simulation.profiles import SCHEDULERS, build
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult, simulate
from extender.simulation.scenarios import SCENARIOS, Size


@dataclass(frozen=True, slots=True)
class Plan:
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    seeds: tuple[int, ...] = (1,)
    size: Size = field(default_factory=Size)
    pipeline: Pipeline = field(default_factory=Pipeline)
    max_hosts: int | None = None  # prioritize.maxHosts for our extender; None keeps the policy's
    weight: int = DEFAULT_WEIGHT
    cpu_metric: str = "cpu"
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


def with_max_hosts(settings: Settings, max_hosts: int | None) -> Settings:
    """The policy with `prioritize.maxHosts` set (0: every host); None: as the policy has it."""
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


def _task(key: tuple[str, int], job: tuple[Settings, Plan]) -> Runs:
    return run_scenario(*job, *key)


def run_plan(
    settings: Settings,
    plan: Plan,
    jobs: int = 1,
    finished: Callable[[tuple[str, int], Runs], None] = lambda key, runs: None,
) -> dict[str, list[Runs]]:
    """scenario -> one Runs per seed, in the plan's order; the same whatever `jobs` is."""
    keys = [(name, seed) for name in plan.scenarios for seed in plan.seeds]
    runs = fork_map(_task, (settings, plan), keys, jobs, finished)
    return {name: [runs[name, seed] for seed in plan.seeds] for name in plan.scenarios}


K = TypeVar("K", bound=Hashable)
P = TypeVar("P")
R = TypeVar("R")

_inherited: Any = None  # fork_map's payload, set before the pool forks


def _call(task: Callable[[K, Any], R], key: K) -> R:
    return task(key, _inherited)


def fork_map(
    task: Callable[[K, P], R],
    payload: P,
    keys: Sequence[K],
    jobs: int,
    finished: Callable[[K, R], None] = lambda key, result: None,
) -> dict[K, R]:
    """key -> task(key, payload); with `jobs` > 1 in forked workers inheriting `payload`."""
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
