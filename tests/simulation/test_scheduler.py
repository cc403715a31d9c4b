"""A scheduling cycle: Fit, then our filter, then default scores plus ours x 10, selectHost."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from extender.policy.loading import load_settings
from extender.simulation.ours import OurExtender
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.workload import GIB, NodeSpec, PodSpec

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
NOW = 1_000_000.0


def pod(uid: str, cpu: int = 1000, memory: int = GIB) -> PodSpec:
    return PodSpec(uid, cpu, memory, cpu / 1000, 0.0, 60.0)


class Counting(OurExtender):
    """Counts prioritize calls (the scheduler skips scoring with one feasible node)."""

    calls = 0

    def prioritize(self, pod: PodSpec, names: Sequence[str], now: float) -> dict[str, int]:
        self.calls += 1
        return super().prioritize(pod, names, now)


def scheduler(extender: OurExtender | None = None) -> KubeScheduler:
    s = KubeScheduler(random.Random(1), extender)
    s.add_node(NodeSpec("small", 4, 16 * GIB))
    s.add_node(NodeSpec("big", 16, 64 * GIB))
    return s


def test_alone_it_places_by_requests_and_keeps_its_cache() -> None:
    s = scheduler()
    assert s.name == "kube-scheduler"
    assert s.schedule(pod("p1"), NOW) == "big"  # least allocated after placing
    assert s.nodes["big"].cpu_requested == 1000
    s.unbind(pod("p1"), "big", NOW)
    assert s.nodes["big"].cpu_requested == 0 and s.nodes["big"].pods == 0


def test_a_pod_that_fits_nowhere_is_unschedulable() -> None:
    s = scheduler()
    assert s.schedule(pod("huge", cpu=17_000), NOW) is None
    assert all(n.pods == 0 for n in s.nodes.values())


def test_our_filter_overrides_the_default_scores() -> None:
    ours = OurExtender(load_settings(SHIPPED), NOW)
    s = scheduler(ours)
    s.refresh({"small": 0.1, "big": 0.97}, NOW)
    assert s.name == "kube-scheduler + decice"
    for i in range(3):  # "big" is best by requests, but hot
        assert s.schedule(pod(f"p{i}"), NOW) == "small"
    assert ours.engine.herd()["small"] > 0  # our bind reserved


def test_our_score_moves_the_choice_when_requests_tie() -> None:
    s = KubeScheduler(random.Random(1), OurExtender(load_settings(SHIPPED), NOW))
    for name in ("a", "b"):
        s.add_node(NodeSpec(name, 8, 32 * GIB))
    s.refresh({"a": 0.8, "b": 0.1}, NOW)
    assert all(s.schedule(pod(f"p{i}", cpu=100), NOW) == "b" for i in range(5))


def test_one_feasible_node_is_taken_without_scoring() -> None:
    ours = Counting(load_settings(SHIPPED), NOW)
    s = scheduler(ours)
    s.refresh({"small": 0.1, "big": 0.1}, NOW)
    assert s.schedule(pod("wide", cpu=8000), NOW) == "big"
    assert ours.calls == 0
    assert s.schedule(pod("narrow"), NOW) is not None
    assert ours.calls == 1


def test_everything_rejected_by_our_filter_waits() -> None:
    s = scheduler(OurExtender(load_settings(SHIPPED), NOW))
    s.refresh({"small": 0.95, "big": 0.99}, NOW)
    assert s.schedule(pod("p"), NOW) is None
