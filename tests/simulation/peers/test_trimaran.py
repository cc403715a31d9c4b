"""Trimaran's plugins on hand-made inputs, against upstream's own worked examples
(scheduler-plugins pkg/trimaran/targetloadpacking/targetloadpacking_test.go TestScore,
pkg/trimaran/loadvariationriskbalancing/analysis_test.go TestComputeScore)."""

from __future__ import annotations

import pytest

from extender.simulation.peers.loadwatcher import NodeLoad, WatcherMetrics
from extender.simulation.peers.trimaran import (
    LoadVariationRiskBalancing,
    TargetLoadPacking,
    predict_utilisation,
    risk_balancing_score,
    risk_score,
    still_missing,
    target_load_score,
)
from extender.simulation.upstream import NodeRequests
from extender.simulation.workload import GIB, PodSpec

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("predicted", "want"),
    [
        (0.0, 40),  # upstream "new node": an idle node scores the target
        (20.0, 70),
        (40.0, 100),  # at the target: the best
        (50.0, 33),  # upstream "hot node": target + 10
        (70.0, 20),
        (100.0, 0),
        (100.5, 0),  # upstream "excess utilization returns min score"
    ],
)
def test_target_load_packing_scores_around_the_target(predicted: float, want: int) -> None:
    assert target_load_score(predicted, 40) == want


def test_a_container_is_predicted_at_its_limit_else_its_request_times_the_multiplier() -> None:
    assert predict_utilisation(500, 800, 1.5) == 800
    assert predict_utilisation(500, None, 1.5) == 750
    assert predict_utilisation(3, None, 1.5) == 5  # Go's math.Round: 4.5 -> 5
    assert predict_utilisation(500, None, 1.0) == 500  # the manifest's multiplier
    assert predict_utilisation(None, None) == 1000  # best effort: DefaultRequests


def test_a_bound_pod_is_missing_until_the_window_ends_a_minute_after_it() -> None:
    assert still_missing(bound_at=100, window_end=90)  # bound after the fetch
    assert still_missing(bound_at=100, window_end=159)
    assert not still_missing(bound_at=100, window_end=160)


@pytest.mark.parametrize(
    ("avg", "std", "margin", "sensitivity", "want"),
    [
        (40, 36, 1, 1, 57),  # "valid data"
        (-40, 36, 1, 2, 65),  # "negative usedAvg"
        (200, 36, 1, 2, 20),  # "large usedAvg"
        (40, -36, 1, 2, 75),  # "negative usedStdev"
        (40, 120, 1, 2, 25),  # "large usedStdev"
        (40, 36, -1, 1, 75),  # "negative margin"
        (40, 36, 1, -1, 57),  # "negative sensitivity"
        (40, 36, 1, 0, 75),  # "zero sensitivity"
    ],
)
def test_risk_score_matches_upstream(
    avg: float, std: float, margin: float, sensitivity: float, want: int
) -> None:
    # Capacity 100, request 10: the upstream cases' absolute figures are percentages here.
    assert round(risk_score(avg, std, 100, 10, margin, sensitivity)) == want


def test_zero_capacity_scores_zero() -> None:
    assert risk_score(40, 36, 0, 10) == 0


def test_risk_balancing_takes_the_worse_resource_and_nothing_without_metrics() -> None:
    node = NodeRequests("n", 8000, 32 * GIB)
    pod = PodSpec("p", 800, 4 * GIB, 0.8, 0.0, 60.0)
    busy_cpu = NodeLoad(cpu_avg=50, cpu_std=1, memory_avg=10, memory_std=0)
    # cpu: mu (4000 + 800) / 8000 = 0.6, sigma sqrt(0.01) = 0.1: (1 - 0.35) x 100
    assert risk_balancing_score(busy_cpu, node, pod) == 65
    busy_memory = NodeLoad(cpu_avg=0, cpu_std=0, memory_avg=80, memory_std=0)
    # memory: mu 0.8 + 4 / 32 = 0.925: (1 - 0.4625) x 100 = 53.75
    assert risk_balancing_score(busy_memory, node, pod) == 54
    assert risk_balancing_score(None, node, pod) == 0


def metrics(end: int, cpu: float) -> WatcherMetrics:
    return WatcherMetrics(end, {"a": NodeLoad(cpu, 0, 0, 0)})


def test_target_load_packing_counts_pods_it_bound_until_the_metrics_cover_them() -> None:
    tlp = TargetLoadPacking(target=40, multiplier=1.0)
    nodes = [NodeRequests("a", 10_000, GIB), NodeRequests("b", 10_000, GIB)]
    pod = PodSpec("p", 1000, GIB, 1.0, 0.0, 60.0)
    assert tlp.score(pod, nodes, NOW) == [0, 0]  # no metrics yet: MinNodeScore
    tlp.watcher.collected = metrics(int(NOW), 30.0)
    assert tlp.score(pod, nodes, NOW) == [100, 0]  # 30% + the pod's 10%: the target; b unknown
    tlp.bound(PodSpec("q", 2000, GIB, 2.0, 0.0, 60.0), "a", NOW)
    assert tlp.score(pod, nodes, NOW) == [27, 0]  # 30 + 20 + 10 = 60%
    tlp.watcher.collected = metrics(int(NOW) + 60, 30.0)
    assert tlp.score(pod, nodes, NOW + 60) == [100, 0]  # a minute on: taken as shown
    tlp.released(PodSpec("q", 2000, GIB, 2.0, 0.0, 60.0), "a", NOW + 61)
    assert tlp.bound_pods["a"] == {}


def test_load_variation_risk_balancing_caches_per_fetch() -> None:
    lvrb = LoadVariationRiskBalancing()
    nodes = [NodeRequests("a", 8000, 32 * GIB)]
    pod = PodSpec("p", 800, 4 * GIB, 0.8, 0.0, 60.0)
    assert lvrb.score(pod, nodes, NOW) == [0]
    lvrb.watcher.collected = WatcherMetrics(0, {"a": NodeLoad(50, 1, 10, 0)})
    assert lvrb.score(pod, nodes, NOW) == [65]
    lvrb.watcher.collected = WatcherMetrics(60, {"a": NodeLoad(0, 0, 80, 0)})
    assert lvrb.score(pod, nodes, NOW) == [54]
