"""Placement stories: the real kube-scheduler sends pods to the least-loaded nodes through
our service, and a burst spreads over the nodes as the herd guard promises.

The herd guard (extender/decisions/herd.py, scoring.py) counts every placed pod on its
node as `cpu request / node cores` of load, until a snapshot fetched `herdGuard.settle`
seconds after the bind covers it. The static provider here never refreshes during the
test (`prometheus.interval: 3600`), so every reservation holds for the whole burst: a
node's load as we see it is its static value plus its pods' requests over its cores, and
our filter and scores follow that load. A burst then fills the nodes like water: up to a
common level W, node i taking `(W - load_i) * cores_i / request` pods. Its level share is
that in whole pods: the floor of it, plus one for the largest remainders until the shares
add up to the burst.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

import orjson
import pytest

from tests.harness.controlplane import (
    Stack,
    StartStack,
    fake_nodes,
    pod_manifest,
    static_policy,
)

pytestmark = pytest.mark.e2e

NODES = fake_nodes(30)  # node-1..node-30: odd ones 4 cores, even ones 8 (180 cores)
#: Static loads, 15 of each size in a scrambled order: the 8-core nodes 0.050..0.143, the
#: 4-core ones 0.150..0.243. The coolest is node-2.
LOADS = {
    n.name: round((0.05 if n.cores == 8 else 0.15) + 0.1 * ((7 * ((i - 1) // 2)) % 15) / 15, 3)
    for i, n in enumerate(NODES, 1)
}
BURST = 200
#: The CPU request of every pod, in cores. Why these numbers:
#: * 200 pods x 0.5 cores = 100 cores over 180 lift the level to W = 0.69, below the 0.9
#:   threshold, so the burst never makes every node look hot (200 pods into the 5 default
#:   nodes stopped after 156 binds: every node had passed 0.9, the product working as it
#:   should); more nodes and a larger request, not a higher threshold, because:
#: * our score is an integer 0..10, a step per 0.1 of load; within a step the scheduler's
#:   own plugins choose. 0.5 cores is 0.0625 of an 8-core node, 0.125 of a 4-core one: at
#:   most 1.6 pods share a step (a 100m request puts 8 in one on an 8-core node);
#: * at the printed weight 1 kube-scheduler adds NodeResourcesFit (LeastAllocated) and
#:   NodeResourcesBalancedAllocation, which see requests, not our loads: together they pull
#:   towards equal requests about as hard as our score pulls towards the level, so a node
#:   whose load is above the core-weighted mean gets about (load - mean) / 2 x cores /
#:   request pods beyond its share. Hence the small nodes carry the high loads: the pull
#:   stays under half a pod (measured with one spread of 0.05..0.335 over both sizes and
#:   0.3 cores: 2.3 pods over on the hottest 8-core nodes; 0.05..0.243 and 0.4 cores: up
#:   to 2.1 over in 2 of 5 runs);
#: * kube-scheduler binds in goroutines: several of our binds are in flight while it scores
#:   the next pods on the reservations we know of. At weight 1 its own plugins count its
#:   in-flight pods at once, 100 x request / cores points a pod against our 10 a step: at
#:   0.5 cores a second pod sent to a node on a stale view costs that node more than a step.
REQUEST = 0.5
CPU = f"{round(REQUEST * 1000)}m"


def level_shares(
    loads: Mapping[str, float], cores: Mapping[str, float], request: float, pods: int
) -> tuple[float, dict[str, float]]:
    """(W, node -> share in pods, fractional): the level W at which the nodes below it,
    each taking `(W - load) * cores / request` pods, take `pods` in all (exact water-filling
    over the nodes sorted by load)."""
    order = sorted(loads, key=lambda n: loads[n])
    level = 0.0
    for k in range(1, len(order) + 1):
        active = order[:k]
        level = (pods * request + sum(loads[n] * cores[n] for n in active)) / sum(
            cores[n] for n in active
        )
        if k == len(order) or level <= loads[order[k]]:
            break
    shares = {n: max(0.0, (level - loads[n]) * cores[n] / request) for n in loads}
    return level, shares


def whole_pods(shares: Mapping[str, float], pods: int) -> dict[str, int]:
    """Fractional shares as whole pods adding up to `pods` (largest remainder; ties by
    name, so the result is deterministic)."""
    whole = {n: math.floor(s) for n, s in shares.items()}
    by_remainder = sorted(shares, key=lambda n: (whole[n] - shares[n], n))
    for n in by_remainder[: pods - sum(whole.values())]:
        whole[n] += 1
    return whole


def burst_within_the_level(s: Stack) -> None:
    """The story, on a started stack: a first pod alone, then the burst; asserts the first
    pod on the coolest node, no node above its level share + 2, the cooler half of the
    cluster fuller per core than the hotter half, and a reservation for every pod."""
    cores = {n.name: float(n.cores) for n in NODES}
    coolest = min(LOADS, key=lambda n: LOADS[n])

    # One pod alone goes to the least-loaded node.
    s.create_pod("first", cpu=CPU)
    assert s.wait_bound("first") == coolest

    names = [f"burst-{i:03d}" for i in range(BURST)]
    s.kube.create_pods(s.namespace, [pod_manifest(n, cpu=CPU) for n in names])
    placed = s.kube.wait_all_bound(s.namespace, names, 120)

    # The first pod holds its reservation too: it is part of the water.
    loads = {n: LOADS[n] + (REQUEST / cores[n] if n == coolest else 0.0) for n in LOADS}
    level, shares = level_shares(loads, cores, REQUEST, BURST)
    share = whole_pods(shares, BURST)
    counts = Counter(placed.values())
    [extender] = s.scheduler_config["extenders"]
    print(f"\nweight {extender['weight']}: level W = {level:.3f} (threshold 0.9)")
    print("node     cores  load   share  whole  placed")
    for n in sorted(LOADS, key=lambda n: LOADS[n]):
        print(
            f"{n:8} {cores[n]:5.0f}  {LOADS[n]:.3f}  {shares[n]:5.1f}  {share[n]:5d}  "
            f"{counts[n]:6d}"
        )
    most = max(LOADS, key=lambda n: (counts[n] - share[n], n))
    bind = {"verb": "bind"}
    seconds = s.extender_metric("decice_request_duration_seconds_sum", bind)
    binds = s.extender_metric("decice_request_duration_seconds_count", bind)
    print(
        f"most over its share: {most}, {counts[most]} pods for {share[most]}; "
        f"our /bind took {1000 * seconds / binds:.0f} ms on average"
    )
    over = {n: (counts[n], share[n]) for n in LOADS if counts[n] > share[n] + 2}
    assert not over, f"nodes above their level share + 2, (pods, share): {over}"
    # The cooler half of the cluster took more pods per core than the hotter half.
    by_load = sorted(LOADS, key=lambda n: LOADS[n])
    half = len(by_load) // 2

    def per_core(part: list[str]) -> float:
        return sum(counts[n] for n in part) / sum(cores[n] for n in part)

    assert per_core(by_load[:half]) > per_core(by_load[half:])
    # Every pod holds a reservation (our bind or, when its event came first, the watch).
    held = s.extender_metric("decice_herd_reservations")
    assert held == BURST + 1, held


def test_a_burst_fills_the_nodes_up_to_a_common_level(stack: StartStack) -> None:
    """The config as printed (extender weight 1). kube-scheduler's own NodeResourcesFit
    and BalancedAllocation count every pod it has placed, bind or no bind, as strongly as
    our herd guard does: with the herd guard off (`herdGuard.enabled: false`) this burst
    also stayed within 1 pod of the level shares (measured). So this story holds the
    product as deployed to the promise; the next one shows the herd guard's own part."""
    burst_within_the_level(stack(LOADS, nodes=NODES))


def test_the_herd_guard_alone_keeps_a_burst_within_the_level_share(stack: StartStack) -> None:
    """`scheduler-config --weight 100`: our score outweighs the default plugins about
    eight times (docs/scheduler.md), so the herd guard is what spreads the burst. Without
    it (`herdGuard.enabled: false`) node-2 took 16 pods for a share of 10: filled by
    requests (measured). Its first runs found the guard lagging kube-scheduler's
    concurrent binding cycles (3 to 6 pods over the share in 12 of 18 runs): the
    reservation was taken when the Binding call returned, while the scheduler scored the
    next pods. It is now taken when /bind starts (extender.cluster.binder)."""
    burst_within_the_level(stack(LOADS, nodes=NODES, weight=100))


def test_a_shortlist_follows_the_reservations_and_keeps_the_burst_level(
    stack: StartStack,
) -> None:
    """`prioritize.shortlist: {nodes: 10}`: our filter passes only our best 10 of the 30
    nodes, so kube-scheduler scores 10 (BENCHMARKS.md, "The shortlist": at 5,000 nodes the
    shipped rule cut an attempt from 16.35 to 9.71 ms). The list is read from the table our binds
    keep up to date, so it moves as the burst fills the nodes: the burst still fills them
    like water, and no node past the threshold is ever in it."""
    policy = static_policy(LOADS, prioritize={"shortlist": {"nodes": 10, "share": 0.1}})
    s = stack(policy=policy, nodes=NODES)
    burst_within_the_level(s)
    status, body = s.service.get(f"/explain?pod={s.namespace}/burst-199")
    assert status == 200, body
    doc = orjson.loads(body)
    assert doc["shortlisted"] == 10, doc
    assert doc["candidates"] == len(NODES)
