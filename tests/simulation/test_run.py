"""Whole runs, tiny: every pod placed or counted unplaced, never past a node's
allocatable, under every scheduler; the same numbers for the same seed; our engine fed the
lagged metric."""

from __future__ import annotations

import random
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from extender.policy.loading import load_settings
from extender.policy.settings import Settings
from extender.simulation.experiment import Plan, run_scenario
from extender.simulation.ours import OurExtender
from extender.simulation.profiles import DECICE, KUBE_SCHEDULER, SCHEDULERS
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import DRAIN_SECONDS, RunResult, simulate, successor
from extender.simulation.scenarios import SCENARIOS, Background, Size
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.stats import Metrics
from extender.simulation.workload import EPOCH

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
TINY = Size(nodes=6, warmup=600.0, duration=1200.0, burst=30)


@pytest.fixture(scope="module")
def shipped() -> Settings:
    return load_settings(SHIPPED)


def check_invariants(result: RunResult, pods: int) -> None:
    m = result.metrics
    assert m.pods == pods
    # A pod the rebalancer moved is placed twice: itself, then its successor.
    assert len(result.placements) + len(result.unplaced) == pods + m.moved
    assert not set(result.placements) & result.unplaced
    assert m.unplaced == len(result.unplaced)
    assert result.overcommitted == 0
    assert 0.0 <= m.cpu_p95 <= m.cpu_max <= 1.0
    assert m.demand_p95 <= m.demand_max and m.cpu_max <= m.demand_max + 1e-12
    assert 0.0 <= m.node_minutes_hot <= TINY.nodes * 2 * TINY.duration / 60
    assert result.bands and all(b.p50 <= b.p95 <= b.max for b in result.bands)
    assert 0.0 <= m.exceedance <= 1.0
    longest = (TINY.end + DRAIN_SECONDS) / 60
    assert 0.0 <= m.wait_minutes <= (m.waited + m.unplaced) * longest


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_tiny_run_keeps_its_invariants(shipped: Settings, name: str) -> None:
    runs = run_scenario(shipped, Plan(scenarios=(name,), size=TINY), name, 1)
    pods = len(SCENARIOS[name](1, TINY).pods)
    assert list(runs) == list(SCHEDULERS)
    for scheduler in runs:
        result = runs[scheduler]
        assert result.scenario == name and result.seed == 1 and result.scheduler == scheduler
        check_invariants(result, pods)
    assert set(asdict(runs[DECICE].metrics)) == {
        "node_minutes_hot",
        "cpu_p95",
        "cpu_max",
        "demand_p95",
        "demand_max",
        "cpu_std",
        "placed_on_hot",
        "unplaced",
        "pods",
        "waited",
        "wait_p95",
        "wait_max",
        "wait_minutes",
        "moved",
        "exceedance",
        "peak_1sd",
        "peak_2sd",
        "peak_3sd",
    }


def test_the_same_seed_gives_the_same_numbers(shipped: Settings) -> None:
    plan = Plan(scenarios=("burst",), size=TINY)
    first, again = run_scenario(shipped, plan, "burst", 2), run_scenario(shipped, plan, "burst", 2)
    for name in first:
        a, b = first[name], again[name]
        assert a.metrics == b.metrics
        assert a.placements == b.placements
        assert a.bands == b.bands
    other = run_scenario(shipped, plan, "burst", 3)
    assert other[KUBE_SCHEDULER].placements != first[KUBE_SCHEDULER].placements


def test_a_full_cluster_makes_pods_wait_never_overcommits(shipped: Settings) -> None:
    """Two nodes and far more pods than fit: some wait, some are left, none overcommit."""
    size = Size(nodes=2, warmup=60.0, duration=1800.0, pods=300)
    runs = run_scenario(shipped, Plan(scenarios=("uniform",), size=size), "uniform", 1)
    for name in runs:
        result = runs[name]
        assert result.overcommitted == 0
        assert result.metrics.unplaced > 0 and result.metrics.waited > 0
        assert len(result.placements) + len(result.unplaced) == 300 + result.metrics.moved


def test_the_drain_places_the_last_waiters_and_measures_nothing(
    shipped: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full cluster: the pods still waiting when the measured time ends are retried for
    DRAIN_SECONDS as running pods leave; only those still waiting then count as unplaced,
    and nothing of the drain is measured (the same hot node-minutes, placements on hot
    nodes and bands as a run without it)."""
    import extender.simulation.run as run_module

    size = Size(nodes=2, warmup=60.0, duration=1800.0, pods=300)
    plan = Plan(scenarios=("uniform",), size=size, schedulers=(KUBE_SCHEDULER,))
    drained = run_scenario(shipped, plan, "uniform", 1)[KUBE_SCHEDULER]
    monkeypatch.setattr(run_module, "DRAIN_SECONDS", 0.0)
    cut = run_scenario(shipped, plan, "uniform", 1)[KUBE_SCHEDULER]
    assert cut.metrics.unplaced > drained.metrics.unplaced
    assert drained.metrics.waited - cut.metrics.waited == (
        cut.metrics.unplaced - drained.metrics.unplaced
    )
    assert drained.bands == cut.bands
    # the drain's waiters waited past the measured end: the longest wait only grows
    assert drained.metrics.wait_max > cut.metrics.wait_max > 0
    for field in ("node_minutes_hot", "placed_on_hot", "cpu_p95", "cpu_max"):
        assert getattr(drained.metrics, field) == getattr(cut.metrics, field), field


def test_our_engine_sees_the_windowed_cpu_at_each_refresh(shipped: Settings) -> None:
    """No pods: the metric our engine holds at the end is the background's mean over the
    last rate window's scrape intervals (what the lag model promises, wired end to end)."""
    size = Size(nodes=3, warmup=0.0, duration=1200.0, pods=0)
    scenario = SCENARIOS["uniform"](1, size)
    steps = len(next(iter(scenario.background.levels.values())))
    ramp = {n.name: [i / steps for i in range(steps)] for n in scenario.nodes}
    scenario = replace(scenario, background=Background(ramp))
    ours = OurExtender(shipped, EPOCH)
    simulate(scenario, KubeScheduler(random.Random(1), ours), Pipeline(fast_window=0))
    # The last refresh ran at t = 1185; the last rule evaluation at 1170 averaged the 19
    # scrape intervals ending 900..1170, each holding one tick at the background's level.
    expected = sum(ramp["node-000"][k] for k in range(59, 78)) / 19
    cpu = ours.engine.snapshot.metrics["cpu"]
    assert cpu.fetched_at == EPOCH + 1185
    assert cpu.values["node-000"] == pytest.approx(expected)


def test_metrics_are_measured_after_the_warmup_only(shipped: Settings) -> None:
    size = Size(nodes=3, warmup=600.0, duration=300.0, pods=0)
    plan = Plan(scenarios=("skewed",), size=size, schedulers=(KUBE_SCHEDULER,))
    runs = run_scenario(shipped, plan, "skewed", 1)
    assert list(runs) == [KUBE_SCHEDULER]
    m: Metrics = runs[KUBE_SCHEDULER].metrics
    assert m.pods == 0 and m.placed_on_hot == 0
    assert len(runs[KUBE_SCHEDULER].bands) == (600 + 300) // 15  # bands cover the warm-up too
    assert m.node_minutes_hot <= 3 * 300 / 60


def test_our_engine_sees_the_larger_of_the_rule_and_the_raw_rate(shipped: Settings) -> None:
    """A node whose unseen load doubles two minutes before the end: the rule alone has
    shown a fraction of it, the metric our engine holds (with the 1-minute raw rate) all."""
    size = Size(nodes=2, warmup=0.0, duration=900.0, pods=0)
    scenario = SCENARIOS["uniform"](1, size)
    steps = len(next(iter(scenario.background.levels.values())))
    jump = {n.name: [0.3 if k < steps - 9 else 0.6 for k in range(steps)] for n in scenario.nodes}
    scenario = replace(scenario, background=Background(jump))
    ours = OurExtender(shipped, EPOCH)
    simulate(scenario, KubeScheduler(random.Random(1), ours, name=DECICE), Pipeline())
    cpu = ours.engine.snapshot.metrics["cpu"].values
    assert cpu["node-000"] == pytest.approx(0.6)


def test_the_rebalancer_moves_pods_only_when_the_policy_evicts(shipped: Settings) -> None:
    """The shipped policy evicts: in moving-load, where busy work lands on nodes with pods
    of ours, it moves some, each replaced by a successor that is scheduled anew; in
    dry-run nothing moves (the same placements as no rebalancer at all)."""
    plan = Plan(scenarios=("moving-load",), size=TINY, schedulers=(DECICE,))
    evicting = run_scenario(shipped, plan, "moving-load", 1)[DECICE]
    assert shipped.rebalance.mode == "evict" and evicting.metrics.moved > 0
    successors = [uid for uid in evicting.placements if "~" in uid]
    assert (
        len(successors) + len([u for u in evicting.unplaced if "~" in u]) == evicting.metrics.moved
    )
    rules = shipped.rebalance.model_copy(update={"mode": "dry-run"})
    dry = shipped.model_copy(update={"rebalance": rules})
    still = run_scenario(dry, plan, "moving-load", 1)[DECICE]
    assert still.metrics.moved == 0 and not [u for u in still.placements if "~" in u]


def test_a_successor_runs_what_its_pod_had_left() -> None:
    pod = SCENARIOS["uniform"](1, TINY).pods[0]
    after = successor(pod, left=120.0, now=900.0, generation=3)
    assert (after.uid, after.arrival, after.duration) == (f"{pod.uid}~3", 900.0, 120.0)
    assert (after.usage, after.workload, after.cpu_milli) == (
        pod.usage,
        pod.workload,
        pod.cpu_milli,
    )
    assert successor(after, left=5.0, now=950.0, generation=4).uid == f"{pod.uid}~4"
