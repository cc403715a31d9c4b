"""The replay shapes' histories on their own (no server): seeded, of the sizes each shape
draws from, with pods arriving through the range and Deployments rolled across it."""

from __future__ import annotations

import pytest

from tests.benchmarks.replayshapes import SHAPES, Shaped

END = 1_800_000_000.0
SIZES = {"issue": (6, 10), "moving": (12, 20), "diurnal": (8, 14), "noisy": (40, 60)}


def summary(shaped: Shaped) -> list[tuple[str, str | None, float, float | None]]:
    return [(p.name, p.node, p.created, p.end) for p in shaped.history.pods]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_shape_is_its_seed(shape: str) -> None:
    build = SHAPES[shape]
    first = build(1, END)
    assert summary(first) == summary(build(1, END))
    assert summary(first) != summary(build(2, END))
    assert first.description.startswith(f"{shape} seed 1: ")


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pods_arrive_through_the_range_and_workloads_span_it(shape: str, seed: int) -> None:
    shaped = SHAPES[shape](seed, END)
    history = shaped.history
    low, high = SIZES[shape]
    assert low <= len(history.nodes) <= high
    assert history.start < shaped.start < shaped.end == history.end
    arrived = [p for p in history.pods if shaped.start <= p.created < shaped.end]
    assert len(arrived) >= 30
    # Arrivals spread over the range, not in one burst.
    span = shaped.end - shaped.start
    assert {int(4 * (p.created - shaped.start) / span) for p in arrived} == {0, 1, 2, 3}
    # Some Deployment has pods running before --from and pods created in the range.
    spans = [
        d
        for d in {p.deployment for p in history.pods if p.deployment}
        if any(
            p.created < shaped.start and (p.end is None or p.end > shaped.start)
            for p in history.pods
            if p.deployment == d
        )
        and any(p.created >= shaped.start for p in history.pods if p.deployment == d)
    ]
    assert spans
    # A rollout: pods of two ReplicaSets of one Deployment.
    replicasets: dict[str, set[str]] = {}
    for p in history.pods:
        if p.deployment:
            replicasets.setdefault(p.deployment, set()).add(p.owner_name)
    assert any(len(r) > 1 for r in replicasets.values())
    # Every pod that ran was placed on a node that exists, bound after it was created.
    names = {n.name for n in history.nodes}
    for p in history.pods:
        if p.node is not None:
            assert p.node in names
            assert p.bound is not None and p.start is not None
            assert p.created <= p.bound <= p.start


def test_noisy_nodes_spike_around_the_same_mean() -> None:
    shaped = SHAPES["noisy"](1, END)
    history = shaped.history
    times = [shaped.start + 30 * k for k in range(int((shaped.end - shaped.start) // 30))]
    spiky = [n for n in history.nodes if len(n.background) > 2]
    assert 3 <= len(spiky) <= 6
    for node in spiky:
        levels = [node.unseen(t) / node.cores for t in times]
        mean = sum(levels) / len(levels)
        assert max(levels) >= 0.8 and 0 < min(levels) < mean
        assert 0.1 <= mean <= 0.45
    kinds = {(p.owner_kind, p.scheduler) for p in history.pods}
    assert ("DaemonSet", "default-scheduler") in kinds and ("", "batch-scheduler") in kinds
