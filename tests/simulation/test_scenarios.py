"""Each scenario is a pure function of its seed, and is about what its name says."""

from __future__ import annotations

import random
import statistics

import pytest

from extender.simulation.scenarios import BUSY, CALM, SCENARIOS, Scenario, Size
from extender.simulation.workload import (
    DURATION_CLIP,
    HOG_FACTOR,
    distribution_text,
    make_pod,
    mean_factor,
    stream_rate,
)

SMALL = Size(nodes=20, warmup=600.0, duration=1800.0, burst=50)


def fingerprint(s: Scenario) -> tuple[object, ...]:
    return (s.nodes, s.pods, {n: tuple(v) for n, v in s.background.levels.items()}, s.description)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_scenario_is_the_same_for_the_same_seed(name: str) -> None:
    build = SCENARIOS[name]
    first = build(3, SMALL)
    assert first.name == name and first.seed == 3
    assert fingerprint(build(3, SMALL)) == fingerprint(first)
    assert fingerprint(build(4, SMALL)) != fingerprint(first)
    assert [p.arrival for p in first.pods] == sorted(p.arrival for p in first.pods)
    assert len({p.uid for p in first.pods}) == len(first.pods)
    assert all(0 <= p.arrival < SMALL.end for p in first.pods)
    for series in first.background.levels.values():
        assert all(0.0 <= v <= 1.0 for v in series)


def test_scenarios_of_a_seed_share_nodes_and_pod_stream() -> None:
    uniform, skewed = SCENARIOS["uniform"](5, SMALL), SCENARIOS["skewed"](5, SMALL)
    assert uniform.nodes == skewed.nodes
    assert uniform.pods == skewed.pods


def test_skewed_makes_a_tenth_of_the_nodes_busy() -> None:
    s = SCENARIOS["skewed"](1, Size(nodes=50, warmup=600.0, duration=600.0))
    means = {n: statistics.fmean(v) for n, v in s.background.levels.items()}
    busy = [n for n, m in means.items() if m > (CALM[1] + BUSY[0]) / 2]
    assert len(busy) == 5
    assert all(BUSY[0] - 0.1 < means[n] < BUSY[1] + 0.1 for n in busy)


def test_burst_adds_its_pods_at_one_instant() -> None:
    s = SCENARIOS["burst"](1, SMALL)
    burst = [p for p in s.pods if p.uid.startswith("burst-")]
    assert len(burst) == SMALL.burst
    assert len({p.arrival for p in burst}) == 1
    assert burst[0].arrival >= SMALL.warmup


def test_hot_node_turns_one_node_hot_after_a_third_of_the_measured_time() -> None:
    s = SCENARIOS["hot-node"](2, SMALL)
    switch = SMALL.warmup + SMALL.duration / 3
    before = {n.name: s.background.at(n.name, switch - 300) for n in s.nodes}
    after = {n.name: s.background.at(n.name, switch + 300) for n in s.nodes}
    jumped = [n for n in before if after[n] - before[n] > 0.2]
    assert len(jumped) == 1
    assert jumped[0] in s.description


def test_new_node_joins_empty_mid_run() -> None:
    s = SCENARIOS["new-node"](1, SMALL)
    new = [n for n in s.nodes if n.added_at > 0]
    assert len(new) == 1 and new[0].name == "node-new"
    assert SMALL.warmup < new[0].added_at < SMALL.end
    assert len(s.nodes) == SMALL.nodes + 1


def test_the_pod_distribution_is_what_the_report_says() -> None:
    rng = random.Random("distribution")
    pods = [make_pod(rng, str(i), 0.0) for i in range(20_000)]
    factors = [p.usage / p.cores for p in pods]
    assert statistics.fmean(factors) == pytest.approx(mean_factor(), rel=0.05)
    hogs = sum(1 for f in factors if HOG_FACTOR[0] <= f <= HOG_FACTOR[1]) / len(pods)
    assert 0.08 < hogs < 0.13  # 10% hogs, plus a rare normal pod in that range
    assert sum(1 for f in factors if f <= 0.1) / len(pods) > 0.14  # 15% idle
    assert all(DURATION_CLIP[0] <= p.duration <= DURATION_CLIP[1] for p in pods)
    assert statistics.fmean(p.cores for p in pods) == pytest.approx(0.475, rel=0.03)
    assert "mean factor ~" in distribution_text()


def test_the_stream_keeps_requests_at_the_load() -> None:
    """Little's law: rate x mean request x mean duration = load x cores."""
    s = SCENARIOS["uniform"](1, Size(nodes=40, warmup=3600.0, duration=7200.0))
    rate = stream_rate(s.nodes, 0.25)
    assert len(s.pods) == pytest.approx(rate * s.size.end, rel=0.1)
    pinned = SCENARIOS["uniform"](1, Size(nodes=10, warmup=60.0, duration=60.0, pods=37))
    assert len(pinned.pods) == 37


@pytest.mark.parametrize(
    "bad",
    [{"nodes": 0}, {"duration": 0.0}, {"warmup": -1.0}, {"load": -0.1}, {"pods": -1}],
)
def test_a_size_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Size(**bad)  # type: ignore[arg-type]
