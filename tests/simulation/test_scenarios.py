"""Each scenario is a pure function of its seed, and is about what its name says; pods come
from workloads whose distribution is what the report prints."""

from __future__ import annotations

import random
import statistics

import pytest

from extender.simulation.scenarios import (
    BUSY,
    CALM,
    DIURNAL_SWING,
    OVER_FACTOR,
    SCENARIOS,
    UNDER_FACTOR,
    Scenario,
    Size,
)
from extender.simulation.workload import (
    DURATION_CLIP,
    HOG_FACTOR,
    distribution_text,
    make_pods,
    make_workloads,
    mean_factor,
    mean_request,
    mix_request,
    stream_rate,
    use_per_request,
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


def test_moving_load_moves_a_tenth_of_the_nodes_busy_work_to_another_tenth() -> None:
    s = SCENARIOS["moving-load"](1, SMALL)
    switch = SMALL.warmup + SMALL.duration / 3
    before = {n.name: s.background.at(n.name, switch - 300) for n in s.nodes}
    after = {n.name: s.background.at(n.name, switch + 300) for n in s.nodes}
    cooled = [n for n in before if before[n] - after[n] > 0.2]
    heated = [n for n in before if after[n] - before[n] > 0.2]
    assert len(cooled) == len(heated) == 2 and not set(cooled) & set(heated)
    assert all(after[n] > BUSY[0] - 0.15 for n in heated)
    assert "moves from 2 nodes to 2 others" in s.description


def test_misrequested_adds_over_and_under_users_over_time_and_at_once() -> None:
    s = SCENARIOS["misrequested"](1, SMALL)
    over = [w for w in s.workloads if w.name.startswith("over-")]
    under = [w for w in s.workloads if w.name.startswith("under-")]
    assert len(over) == len(under) == 2
    assert all(OVER_FACTOR[0] <= w.factor <= OVER_FACTOR[1] for w in over)
    assert all(w.factor == UNDER_FACTOR for w in under)
    odd = [p for p in s.pods if p.workload.startswith(("over-", "under-"))]
    burst = [p for p in odd if "-burst-" in p.uid]
    assert len(burst) == 4 * (SMALL.burst // 5 // 4) and len({p.arrival for p in burst}) == 1
    assert len(odd) > len(burst)  # and over the run
    assert "a tenth" in s.description and "at once" in s.description
    uniform = SCENARIOS["uniform"](1, SMALL)
    assert set(uniform.pods) <= set(s.pods)  # the same stream beside them


def test_diurnal_swings_every_node_together() -> None:
    size = Size(nodes=10, warmup=3600.0, duration=7200.0)
    s = SCENARIOS["diurnal"](1, size)
    peak = size.warmup + size.duration / 2
    trough = peak - size.end / 2
    at_peak = statistics.fmean(s.background.at(n.name, peak) for n in s.nodes)
    at_trough = statistics.fmean(s.background.at(n.name, trough) for n in s.nodes)
    assert at_peak - at_trough == pytest.approx(2 * DIURNAL_SWING, abs=0.08)
    assert "swings together" in s.description


def test_every_scenario_states_its_claim() -> None:
    for name, build in SCENARIOS.items():
        assert ":" in build(1, SMALL).description, name


def test_new_node_joins_empty_mid_run() -> None:
    s = SCENARIOS["new-node"](1, SMALL)
    new = [n for n in s.nodes if n.added_at > 0]
    assert len(new) == 1 and new[0].name == "node-new"
    assert SMALL.warmup < new[0].added_at < SMALL.end
    assert len(s.nodes) == SMALL.nodes + 1


def test_the_pod_distribution_is_what_the_report_says() -> None:
    rng = random.Random("distribution")
    workloads = make_workloads(rng, 4000)
    factors = [w.factor for w in workloads]
    hogs = [w for w in workloads if HOG_FACTOR[0] <= w.factor <= HOG_FACTOR[1]]
    assert sum(1 for f in factors if f <= 0.1) >= 600  # exactly 15% idle (+ a rare normal)
    assert 400 <= len(hogs) < 440  # exactly 10% hogs, plus a rare normal one in that range
    assert sum(1 for w in hogs if w.cpu_milli > 500) <= 10  # hogs ask for little (a rare normal)
    equal = [
        w.__class__(w.name, w.template_hash, w.cpu_milli, w.memory, w.factor) for w in workloads
    ]
    pods = make_pods(rng, [0.0] * 40_000, equal)
    per_pod = [p.usage / p.cores for p in pods]
    assert statistics.fmean(per_pod) == pytest.approx(mean_factor(), rel=0.05)
    used = sum(p.usage for p in pods) / sum(p.cores for p in pods)
    assert used == pytest.approx(use_per_request(), rel=0.05)
    assert all(DURATION_CLIP[0] <= p.duration <= DURATION_CLIP[1] for p in pods)
    assert statistics.fmean(p.cores for p in pods) == pytest.approx(mean_request(), rel=0.03)
    assert "mean factor of a pod ~" in distribution_text()


def test_a_workloads_pods_share_its_requests_and_name_its_replicaset() -> None:
    s = SCENARIOS["uniform"](2, SMALL)
    by_name = {w.name: w for w in s.workloads}
    assert len(by_name) == 10  # half a workload per node
    for p in s.pods:
        w = by_name[p.workload]
        assert (p.cpu_milli, p.memory) == (w.cpu_milli, w.memory)
        assert p.replicaset == w.replicaset == f"{w.name}-{w.template_hash}"
        assert p.usage / p.cores == pytest.approx(w.factor, rel=1.5)
    assert len({p.workload for p in s.pods}) > 1


def test_the_stream_keeps_requests_at_the_load() -> None:
    """Little's law: rate x mean request x mean duration = load x cores."""
    s = SCENARIOS["uniform"](1, Size(nodes=40, warmup=3600.0, duration=7200.0))
    rate = stream_rate(s.nodes, 0.25, mix_request(s.workloads))
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
