"""kube-scheduler's default scores against the worked examples of upstream's own tests
(pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go and
balanced_allocation_test.go, v1.35 line: TestLeastAllocatedScoringStrategy and
TestNodeResourcesBalancedAllocation; podtopologyspread/scoring_test.go:
TestPodTopologySpreadScore). Their "cpu": "4000" is 4000 cores; only ratios matter, so the
numbers are taken as given."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from extender.simulation.upstream import (
    NodeRequests,
    balanced_allocation,
    extender_points,
    fitting_nodes,
    least_allocated,
    least_requested_score,
    round_half_away,
    select_host,
    spread_scores,
)


def fits(node: NodeRequests, cpu: int, memory: int) -> bool:
    """NodeResourcesFit's filter for one node, as fit.go reads: the reference that
    fitting_nodes inlines."""
    if node.pods + 1 > node.max_pods:
        return False
    if cpu == 0 and memory == 0:
        return True
    return node.cpu >= cpu + node.cpu_requested and node.memory >= memory + node.memory_requested


def default_score(node: NodeRequests, cpu: int, memory: int) -> int:
    return least_allocated(node, cpu, memory) + balanced_allocation(node, cpu, memory)


def node(cpu: int, memory: int, cpu_requested: int = 0, memory_requested: int = 0) -> NodeRequests:
    n = NodeRequests("n", cpu, memory)
    n.cpu_requested, n.memory_requested = cpu_requested, memory_requested
    return n


@pytest.mark.parametrize(
    ("allocatable", "requested", "pod", "want"),
    [
        # "nothing scheduled, nothing requested": 100 and 100
        ((4000, 10000), (0, 0), (0, 0), 100),
        # "nothing scheduled, resources requested, differently sized nodes": 37 and 50
        ((4000, 10000), (0, 0), (3000, 5000), 37),
        ((6000, 10000), (0, 0), (3000, 5000), 50),
        # "no resources requested, pods scheduled with resources": 70 and 57
        ((10000, 20000), (6000, 0), (0, 0), 70),
        ((10000, 20000), (6000, 5000), (0, 0), 57),
        # "resources requested, pods scheduled with resources": 57 and 45
        ((10000, 20000), (3000, 0), (3000, 5000), 57),
        ((10000, 20000), (3000, 5000), (3000, 5000), 45),
        # "..., differently sized nodes": node2 60
        ((10000, 50000), (3000, 5000), (3000, 5000), 60),
        # "requested resources exceed node capacity": 50 and 25
        ((4000, 10000), (3000, 0), (3000, 0), 50),
        ((4000, 10000), (3000, 5000), (3000, 0), 25),
        # "zero node resources, pods scheduled with resources": 0
        ((0, 0), (3000, 0), (0, 0), 0),
    ],
)
def test_least_allocated_matches_upstream(
    allocatable: tuple[int, int], requested: tuple[int, int], pod: tuple[int, int], want: int
) -> None:
    assert least_allocated(node(*allocatable, *requested), *pod) == want


@pytest.mark.parametrize(
    ("allocatable", "requested", "pod", "want"),
    [
        # "nothing scheduled, resources requested, differently sized nodes": 87 and 100
        ((4000, 10000), (0, 0), (3000, 5000), 87),
        ((6000, 10000), (0, 0), (3000, 5000), 100),
        # "resources requested, pods scheduled with resources": 82 and 95
        ((10000, 20000), (3000, 0), (3000, 5000), 82),
        ((10000, 20000), (3000, 5000), (3000, 5000), 95),
        # "..., differently sized nodes": node2 80
        ((10000, 50000), (3000, 5000), (3000, 5000), 80),
        # "requested resources at node capacity": 50 and 75
        ((6000, 10000), (3000, 0), (3000, 0), 50),
        ((6000, 10000), (3000, 5000), (3000, 0), 75),
    ],
)
def test_balanced_allocation_matches_upstream(
    allocatable: tuple[int, int], requested: tuple[int, int], pod: tuple[int, int], want: int
) -> None:
    assert balanced_allocation(node(*allocatable, *requested), *pod) == want


def test_a_best_effort_pod_skips_balanced_allocation() -> None:
    """PreScore answers Skip for a pod requesting nothing: no score from the plugin."""
    assert balanced_allocation(node(4000, 10000), 0, 0) == 0


def test_least_requested_score_is_integer_arithmetic() -> None:
    assert least_requested_score(1, 3) == 66  # (3 - 1) * 100 // 3, truncated
    assert least_requested_score(4, 3) == 0
    assert least_requested_score(0, 0) == 0


def test_default_score_is_fit_plus_balanced_weight_one() -> None:
    n = node(10000, 20000, 3000, 5000)
    assert default_score(n, 3000, 5000) == 45 + 95


def test_fit_filter_checks_each_resource_and_the_pod_count() -> None:
    n = node(4000, 8000, 3000, 6000)
    assert fits(n, 1000, 2000) and fitting_nodes([n], 1000, 2000) == [n]  # exactly full is fine
    assert not fits(n, 1001, 0)
    assert not fits(n, 0, 2001)
    n.pods = n.max_pods
    assert not fits(n, 0, 0)  # "Too many pods" even for a pod requesting nothing
    n.pods = 0
    assert fits(node(1000, 1000, 5000, 5000), 0, 0)  # requesting nothing always fits


def test_extender_points_rescale_0_10_to_0_100_times_weight() -> None:
    assert extender_points(7, 1) == 70
    assert extender_points(7, 3) == 210
    assert extender_points(0, 5) == 0


def test_select_host_takes_the_best_and_breaks_ties_evenly() -> None:
    assert select_host([("a", 1), ("b", 3), ("c", 2)], random.Random(0)) == "b"
    rng = random.Random(7)
    counts = Counter(
        select_host([("a", 5), ("b", 5), ("c", 5), ("d", 1)], rng) for _ in range(3000)
    )
    assert set(counts) == {"a", "b", "c"}
    assert all(800 < counts[n] < 1200 for n in "abc")
    again = random.Random(7)
    first = [select_host([("a", 5), ("b", 5)], again) for _ in range(20)]
    again = random.Random(7)
    assert [select_host([("a", 5), ("b", 5)], again) for _ in range(20)] == first
    with pytest.raises(ValueError):
        select_host([], rng)


@pytest.mark.parametrize(
    ("counts", "max_skew", "want"),
    [
        # "one constraint on node, no existing pods"
        ([0, 0], 1, [100, 100]),
        # "one constraint on node, all 4 nodes are candidates": 2/1/0/3
        ([2, 1, 0, 3], 1, [20, 60, 100, 0]),
        # "..., maxSkew=2"
        ([2, 1, 0, 3], 2, [33, 66, 100, 16]),
        # "..., maxSkew=3": 4/3/2/1, and "system defaulting, nodes don't have zone"
        ([4, 3, 2, 1], 3, [44, 66, 77, 100]),
        # "one constraint on node, 3 out of 4 nodes are candidates": 4/2/1/~3~
        ([4, 2, 1], 1, [33, 83, 100]),
        # "one constraint on node, all nodes have the same number of matching pods"
        ([1, 1], 1, [100, 100]),
    ],
)
def test_spread_scores_match_upstream(counts: list[int], max_skew: int, want: list[int]) -> None:
    assert spread_scores(counts, max_skew) == want


def test_the_system_default_spreads_with_max_skew_3() -> None:
    assert spread_scores([4, 3, 2, 1]) == [44, 66, 77, 100]


def test_round_half_away_is_gos_math_round() -> None:
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, -0.5, 2.4)] == [1, 2, 3, -1, 2]


def test_a_node_counts_its_pods_by_replicaset() -> None:
    n = NodeRequests("n", 4000, 8000)
    n.add(100, 100, "web-abc")
    n.add(100, 100, "web-abc")
    n.add(100, 100)
    assert n.owners == {"web-abc": 2} and n.pods == 3
    n.memo[(1,)] = 5
    n.add(100, 100, "web-abc", -1)
    assert n.memo == {}  # what plugins computed from the node's requests is stale
    n.add(100, 100, "web-abc", -1)
    assert n.owners == {}


def test_fitting_nodes_is_fits_over_every_node() -> None:
    rng = random.Random(5)
    nodes = []
    for i in range(300):
        n = NodeRequests(f"n{i}", rng.choice([0, 4000, 8000]), rng.choice([0, 8000]))
        n.cpu_requested, n.memory_requested = rng.randrange(9000), rng.randrange(9000)
        n.pods = rng.choice([0, 109, 110])
        nodes.append(n)
    for cpu, memory in [(0, 0), (500, 0), (0, 500), (1000, 2000), (9000, 9000)]:
        assert fitting_nodes(nodes, cpu, memory) == [n for n in nodes if fits(n, cpu, memory)]
