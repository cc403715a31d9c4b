"""Our extender in the simulation answers what the service answers: the shipped policy,
the real engine, the wire format."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.policy.loading import load_settings
from extender.policy.settings import Settings
from extender.simulation.experiment import with_max_hosts
from extender.simulation.ours import OurExtender
from extender.simulation.workload import GIB, PodSpec

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
NOW = 1_000_000.0
POD = PodSpec("p-1", 2000, GIB, 2.0, 0.0, 60.0)
NODES = ["a", "b", "c"]
CORES = {"a": 8.0, "b": 8.0, "c": 8.0}


@pytest.fixture(scope="module")
def shipped() -> Settings:
    return load_settings(SHIPPED)


def extender(settings: Settings) -> OurExtender:
    ours = OurExtender(settings, NOW)
    ours.install({"a": 0.2, "b": 0.95, "c": 0.5}, CORES, NOW)
    return ours


def test_filter_drops_the_node_above_the_shipped_threshold(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.filters
    assert ours.filter(POD, NODES, NOW) == ["a", "c"]


def test_prioritize_scores_lower_cpu_higher(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.prioritize(POD, ["a", "c"], NOW) == {"a": 8, "c": 5}


def test_a_bind_reserves_on_the_herd_guard_and_a_departure_frees_it(shipped: Settings) -> None:
    ours = extender(shipped)
    ours.bound(POD, "a", NOW)
    assert ours.engine.herd() == {"a": pytest.approx(2.0 / 8)}
    assert ours.prioritize(POD, ["a", "c"], NOW + 1)["a"] == 6  # 0.2 + 0.25 counted
    assert ours.engine.pods.get(POD.uid) is not None
    ours.released(POD, NOW + 2)
    assert ours.engine.herd() == {}


def test_the_reservation_ends_with_a_refresh_taken_settle_seconds_later(shipped: Settings) -> None:
    ours = extender(shipped)
    ours.bound(POD, "a", NOW)
    settle = shipped.herd_guard.settle
    ours.install({"a": 0.2, "b": 0.95, "c": 0.5}, CORES, NOW + settle - 1)
    assert ours.engine.herd() != {}
    ours.install({"a": 0.2, "b": 0.95, "c": 0.5}, CORES, NOW + settle)
    assert ours.engine.herd() == {}


def test_max_hosts_keeps_the_best_k(shipped: Settings) -> None:
    ours = extender(with_max_hosts(shipped, 1))
    assert ours.prioritize(POD, ["a", "c"], NOW) == {"a": 8}
    every = extender(with_max_hosts(shipped, 0))
    assert every.prioritize(POD, ["a", "c"], NOW) == {"a": 8, "c": 5}


def test_a_node_without_data_is_neutral_under_fail_open(shipped: Settings) -> None:
    ours = extender(shipped)
    assert ours.filter(POD, ["a", "new"], NOW) == ["a", "new"]
    assert ours.prioritize(POD, ["a", "new"], NOW)["new"] == 5
