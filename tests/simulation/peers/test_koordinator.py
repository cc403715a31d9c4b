"""Koordinator's LoadAwareScheduling on hand-made inputs: the estimator, the assign cache's
rule for pods the NodeMetric does not show yet, the thresholds and the score."""

from __future__ import annotations

from extender.simulation.peers.koordinator import (
    DEFAULT_MILLI_CPU,
    LoadAware,
    estimate,
    estimate_pod,
    load_aware_score,
    over_threshold,
)
from extender.simulation.peers.koordlet import NodeMetric
from extender.simulation.upstream import NodeRequests
from extender.simulation.upstream import least_requested_score as least_used_score
from extender.simulation.workload import GIB, PodSpec

NOW = 1_000_000.0


def pod(uid: str, cpu: int = 1000, limit: int | None = None) -> PodSpec:
    return PodSpec(uid, cpu, 2 * GIB, cpu / 1000, 0.0, 600.0, cpu_limit_milli=limit)


def test_the_estimator_takes_the_larger_of_request_and_limit_times_the_factor() -> None:
    assert estimate_pod(pod("r", 1000)) == (850, round(2 * GIB * 0.7))  # no limit
    assert estimate_pod(pod("l", 1000, limit=2000)) == (1700, round(2 * GIB * 0.7))
    assert estimate(0, None, 85, DEFAULT_MILLI_CPU) == 250  # requests nothing: the default
    assert estimate(0, 200, 85, DEFAULT_MILLI_CPU) == 170  # a limit alone counts
    assert estimate(1000, 500, 85, DEFAULT_MILLI_CPU) == 500  # never above the limit


def test_scores_and_thresholds() -> None:
    assert least_used_score(2000, 8000) == 75
    assert least_used_score(9000, 8000) == 0
    assert load_aware_score((2000, 8 * GIB), (8000, 32 * GIB)) == 75
    assert load_aware_score((6000, 0), (8000, 32 * GIB)) == (25 + 100) // 2
    assert not over_threshold(5200, 8000, 65)  # 65% is allowed
    assert over_threshold(5240, 8000, 65)  # 65.5% rounds to 66
    assert not over_threshold(9000, 8000, 0)  # 0: no threshold


def metric(at: float, cpu: int, pods: dict[str, tuple[int, int]] | None = None) -> NodeMetric:
    return NodeMetric(at, cpu, 4 * GIB, pods or {})


def test_a_pod_counts_until_the_node_metric_shows_it() -> None:
    plugin = LoadAware()
    plugin.koordlets.metrics["n"] = metric(NOW, 2000)
    plugin.bound(pod("old"), "n", NOW - 120)  # placed before the last report interval
    plugin.bound(pod("young"), "n", NOW - 30)  # placed within it
    plugin.bound(pod("unseen"), "n", NOW - 120)
    plugin.koordlets.metrics["n"] = metric(NOW, 2000, {"old": (900, GIB), "young": (300, GIB)})
    plugin._existing.clear()
    cpu, _ = plugin.existing("n", plugin.koordlets.metrics["n"])
    # old: shown; young: 850 - 300 = 550 not shown yet; unseen: not reported, all 850
    assert cpu == 2000 + 550 + 850
    plugin.released(pod("unseen"), "n", NOW)
    assert plugin.existing("n", plugin.koordlets.metrics["n"])[0] == 2000 + 550


def test_the_filter_passes_unknown_nodes_and_rejects_busy_or_never_reported() -> None:
    plugin = LoadAware()
    nodes = [NodeRequests(name, 8000, 32 * GIB) for name in ("calm", "busy", "new", "gone")]
    plugin.koordlets.metrics.update(
        calm=metric(NOW, 2000),
        busy=metric(NOW, 4500),  # + the pod's 850: 67% > 65%
        new=NodeMetric(None),
    )
    passed = [n.name for n in plugin.filter(pod("p"), nodes, NOW)]
    assert passed == ["calm", "gone"]  # "gone" has no NodeMetric at all
    assert plugin.score(pod("p"), nodes, NOW) == [
        load_aware_score((2850, 4 * GIB + round(2 * GIB * 0.7)), (8000, 32 * GIB)),
        load_aware_score((5350, 4 * GIB + round(2 * GIB * 0.7)), (8000, 32 * GIB)),
        0,
        0,
    ]
    stale = [n.name for n in plugin.filter(pod("p"), nodes, NOW + 180)]
    assert stale == ["gone"]  # every report 180 s old: expired
