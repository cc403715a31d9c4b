"""A scheduling cycle: Fit, the profile's filters, our filter, then the weighted scores plus
ours x 10, selectHost; and the default plugins that differ between nodes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from extender.policy.loading import load_settings
from extender.simulation.framework import Plugin, PodTopologySpread, RequestScores
from extender.simulation.ours import OurExtender
from extender.simulation.scheduler import KubeScheduler, Weighted
from extender.simulation.upstream import NodeRequests
from extender.simulation.workload import GIB, NodeSpec, PodSpec
from tests.simulation.test_upstream import default_score

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
NOW = 1_000_000.0
CORES = {"small": 4.0, "big": 16.0}


def pod(uid: str, cpu: int = 1000, memory: int = GIB, workload: str = "") -> PodSpec:
    return PodSpec(uid, cpu, memory, cpu / 1000, 0.0, 60.0, workload, "h" if workload else "")


class Counting(OurExtender):
    """Counts prioritize calls (the scheduler skips scoring with one feasible node)."""

    calls = 0

    def prioritize(self, pod: PodSpec, names: Sequence[str], now: float) -> dict[str, int]:
        self.calls += 1
        return super().prioritize(pod, names, now)


class Refuses(Plugin):
    """A filter plugin that turns a named node away, and remembers what it heard."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.heard: list[tuple[str, str, str]] = []

    def filter(self, pod: PodSpec, nodes: list[NodeRequests], now: float) -> list[NodeRequests]:
        return [n for n in nodes if n.name != self.refused]

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        self.heard.append(("bound", pod.uid, node))

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        self.heard.append(("released", pod.uid, node))


def scheduler(extender: OurExtender | None = None, **kwargs: object) -> KubeScheduler:
    s = KubeScheduler(random.Random(1), extender, **kwargs)  # type: ignore[arg-type]
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


def test_a_filter_plugin_runs_after_fit_and_hears_of_binds() -> None:
    refuses = Refuses("big")
    s = scheduler(filters=[refuses], name="picky")
    assert s.name == "picky"
    assert s.schedule(pod("p1"), NOW) == "small"
    s.unbind(pod("p1"), "small", NOW)
    assert refuses.heard == [("bound", "p1", "small"), ("released", "p1", "small")]
    assert s.schedule(pod("wide", cpu=8000), NOW) is None  # fits only big, which it refuses


def test_our_filter_overrides_the_default_scores() -> None:
    ours = OurExtender(load_settings(SHIPPED), NOW)
    s = scheduler(ours)
    ours.install({"small": 0.1, "big": 0.97}, CORES, NOW)
    assert s.name == "decice"
    for i in range(3):  # "big" is best by requests, but hot
        assert s.schedule(pod(f"p{i}"), NOW) == "small"
    assert ours.engine.herd()["small"] > 0  # our bind reserved


def test_our_score_moves_the_choice_when_requests_tie() -> None:
    ours = OurExtender(load_settings(SHIPPED), NOW)
    s = KubeScheduler(random.Random(1), ours)
    for name in ("a", "b"):
        s.add_node(NodeSpec(name, 8, 32 * GIB))
    ours.install({"a": 0.8, "b": 0.1}, {"a": 8.0, "b": 8.0}, NOW)
    assert all(s.schedule(pod(f"p{i}", cpu=100), NOW) == "b" for i in range(5))


def test_one_feasible_node_is_taken_without_scoring() -> None:
    ours = Counting(load_settings(SHIPPED), NOW)
    s = scheduler(ours)
    ours.install({"small": 0.1, "big": 0.1}, CORES, NOW)
    assert s.schedule(pod("wide", cpu=8000), NOW) == "big"
    assert ours.calls == 0
    assert s.schedule(pod("narrow"), NOW) is not None
    assert ours.calls == 1


def test_everything_rejected_by_our_filter_waits() -> None:
    ours = OurExtender(load_settings(SHIPPED), NOW)
    s = scheduler(ours)
    ours.install({"small": 0.95, "big": 0.99}, CORES, NOW)
    assert s.schedule(pod("p"), NOW) is None


def test_spreading_takes_a_replicaset_off_the_node_it_fills() -> None:
    """Two equal nodes: PodTopologySpread (weight 2) sends the next pod of a ReplicaSet to
    the node without its siblings, even against a small edge from requests."""
    s = KubeScheduler(random.Random(1))
    for name in ("a", "b"):
        s.add_node(NodeSpec(name, 8, 32 * GIB))
    first = s.schedule(pod("w1", cpu=100, workload="web"), NOW)
    second = s.schedule(pod("w2", cpu=100, workload="web"), NOW)
    assert {first, second} == {"a", "b"}
    assert s.nodes["a"].owners == {"web-h": 1} == s.nodes["b"].owners


def test_request_scores_are_cached_per_shape_until_the_node_changes() -> None:
    plugin = RequestScores()
    n = NodeRequests("n", 8000, 32 * GIB)
    p = pod("p", cpu=500)
    assert plugin.score(p, [n], NOW) == [default_score(n, 500, GIB)]
    n.add(4000, 0)
    assert plugin.score(p, [n], NOW) == [default_score(n, 500, GIB)]
    only_fit = RequestScores(fit=1, balanced=0)
    assert only_fit.score(p, [n], NOW) != plugin.score(p, [n], NOW)


def test_spread_skips_pods_without_a_replicaset_or_siblings() -> None:
    plugin = PodTopologySpread()
    nodes = [NodeRequests("a", 8000, GIB), NodeRequests("b", 8000, GIB)]
    assert plugin.score(pod("bare"), nodes, NOW) is None
    assert plugin.score(pod("w", workload="web"), nodes, NOW) is None  # every node 100
    nodes[0].add(100, 100, "web-h")
    assert plugin.score(pod("w", workload="web"), nodes, NOW) == [66, 100]  # maxSkew 3


def test_weights_multiply_each_plugin() -> None:
    s = KubeScheduler(random.Random(1), scores=[Weighted(RequestScores(), 3)])
    for name in ("a", "b"):
        s.add_node(NodeSpec(name, 8, 32 * GIB))
    feasible = list(s.nodes.values())
    totals = dict(s._totals(pod("p", cpu=100), feasible, NOW))
    assert totals["a"] == 3 * default_score(feasible[0], 100, GIB)
