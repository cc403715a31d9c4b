"""extender.rebalancing.plan: which running pods move, and where: pure, table-driven."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from extender.decisions.model import Snapshot
from extender.decisions.pods import PodFacts
from extender.decisions.resources import PodError
from extender.decisions.state import build_tables
from extender.decisions.usage import TEMPLATE_HASH, UsageTable, WorkloadKey, WorkloadUse
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.rebalancing.plan import Plan, plan, relief
from extender.rebalancing.pods import RunningPod, protection, read_running_pod, waits_for_room
from tests.harness.fixtures import NOW, make_snapshot

OLD = NOW - 3600  # created an hour ago: past minAge


def settings(rebalance: dict[str, Any] | None = None, **raw: Any) -> Settings:
    base: dict[str, Any] = {
        "provider": "static",
        "static": {"nodes": {"a": {"cpu": 0.5}}},
        "bind": {"enabled": False},
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "rebalance": {"sustain": 1, "margin": 3, **(rebalance or {})},
    }
    base.update(raw)
    return parse_settings(base)


def running(
    name: str,
    node: str,
    owner: str | None = "ReplicaSet",
    created: float = OLD,
    cpu: float | None = 0.5,
    policy: str | None = None,
    **flags: Any,
) -> RunningPod:
    facts = PodFacts(
        uid=f"uid-{name}",
        name=name,
        namespace="ns",
        scheduler_name="decice_sched",
        cpu_request=cpu,
        node_name=node,
        policy=policy,
    )
    return RunningPod(facts=facts, owner_kind=owner, created=created, **flags)


def check(
    s: Settings,
    pods: list[RunningPod],
    values: dict[str, dict[str, float]],
    streaks: dict[str, int] | None = None,
    cores: dict[str, float] | None = None,
    waiting: list[PodFacts] | None = None,
) -> Plan:
    snapshot: Snapshot = make_snapshot(values)
    tables = build_tables(s, snapshot, {}, NOW)
    queued = waiting or []
    return plan(s, pods, tables, snapshot, streaks or {}, cores or {}, NOW, waiting=queued)


# -- Krake's worked example ---------------------------------------------------------------
# Krake sums weight x value per place: electricity_cost weighted 10 on A and 1 on B,
# green_energy_ratio 1 on A and 10 on B; values 0.9 and 0.1 score A 9.1 and B 1.9. Our
# weights are per metric and values per node, so each node carries its place's weighted
# value (weight x value / 10) and the policy averages two `higher` metrics on 0..10: the
# same inputs give A 5 and B 1 (Krake's scores halved, rounded), and swap the same way.

KRAKE: dict[str, Any] = {
    "provider": "static",
    "static": {"nodes": {"a": {"electricity_cost": 0.9, "green_energy_ratio": 0.01}}},
    "metrics": [
        {"name": "electricity_cost", "direction": "higher"},
        {"name": "green_energy_ratio", "direction": "higher"},
    ],
}


def krake_values(cost: float, green: float) -> dict[str, dict[str, float]]:
    weights = {"a": (10, 1), "b": (1, 10)}
    return {
        "electricity_cost": {n: w[0] * cost / 10 for n, w in weights.items()},
        "green_energy_ratio": {n: w[1] * green / 10 for n, w in weights.items()},
    }


def test_krakes_example_stays_then_moves_once_then_is_left_alone() -> None:
    s = settings(**KRAKE)
    pod = running("app", "a")
    before = check(s, [pod], krake_values(0.9, 0.1))
    [stay] = before.decisions
    assert stay.outcome == "stay" and stay.source_score == 5
    assert not before.moves

    swapped = krake_values(0.1, 0.9)
    after = check(s, [pod], swapped)
    [move] = after.moves
    assert (move.source_score, move.target, move.target_score) == (1, "b", 5)
    assert "gain 4 >= margin 3" in move.reason

    # The evicted pod is terminating until its kubelet stops it; its successor runs on b.
    evicted = RunningPod(pod.facts, "ReplicaSet", OLD, terminating=True)
    successor = running("app-2", "b")
    later = check(s, [evicted, successor], swapped)
    assert not later.moves and later.skipped == {"terminating": 1}
    assert [d.outcome for d in later.decisions] == ["stay"]


# -- stickiness -----------------------------------------------------------------------------


def test_equal_or_near_equal_nodes_never_cause_a_move() -> None:
    s = settings()
    pods = [running("p", "a")]
    streaks: dict[str, int] = {}
    moves = 0
    for cycle in range(60):
        # a and b alternate, always within the margin (scores 5/6/7 against each other)
        lo, hi = (0.35, 0.5) if cycle % 2 else (0.5, 0.35)
        result = check(s, pods, {"cpu": {"a": lo, "b": hi}}, streaks)
        streaks = result.streaks
        moves += len(result.moves)
    assert moves == 0 and streaks == {}


def test_sustain_needs_consecutive_checks_as_a_candidate() -> None:
    s = settings({"sustain": 3})
    pod = [running("p", "a")]
    hot = {"cpu": {"a": 0.8, "b": 0.1}}
    cool = {"cpu": {"a": 0.1, "b": 0.1}}
    streaks: dict[str, int] = {}
    outcomes = []
    # candidate, candidate, recovers (streak reset), then three in a row
    for values in (hot, hot, cool, hot, hot, hot):
        result = check(s, pod, values, streaks)
        streaks = result.streaks
        outcomes.append(result.decisions[0].outcome)
    assert outcomes == ["waiting", "waiting", "stay", "waiting", "waiting", "move"]


def test_a_filtered_node_is_left_for_a_passing_one_first() -> None:
    s = settings({"maxEvictionsPerCycle": 1})
    pods = [running("worse", "b"), running("filtered", "a")]
    result = check(s, pods, {"cpu": {"a": 0.95, "b": 0.7, "c": 0.0}})
    [move] = result.moves
    assert move.pod.facts.name == "filtered" and move.source_score is None
    assert "node filtered (decice: cpu above 0.9)" in move.reason
    [held] = [d for d in result.decisions if d.outcome == "held"]
    assert held.pod.facts.name == "worse" and "maxEvictionsPerCycle" in held.reason
    assert result.streaks == {"uid-worse": 1}  # still due next check


def test_no_move_when_no_other_node_passes() -> None:
    s = settings()
    result = check(s, [running("p", "a")], {"cpu": {"a": 0.95, "b": 0.97}})
    assert not result.moves
    assert "no other node has headroom for it" in result.decisions[0].reason


def test_no_move_to_a_node_without_headroom_for_the_pod() -> None:
    """b scores best (0.2) but has 2 cores: a 2-core pod would take it past 0.9, so its
    successor would wait or overfill b; c (0.4 of 8 cores) has the headroom."""
    s = settings()
    big = running("p", "a", cpu=2.0)
    cores = {"a": 8.0, "b": 2.0, "c": 8.0}
    assert not check(s, [big], {"cpu": {"a": 0.95, "b": 0.2}}, cores=cores).moves
    moved = check(s, [big], {"cpu": {"a": 0.95, "b": 0.2, "c": 0.4}}, cores=cores).moves
    assert [d.target for d in moved] == ["c"]


def test_no_move_where_the_successor_would_wait_for_its_workloads_use() -> None:
    """A young pod measured at 1 core, of a workload whose pods use a median 3 cores: its
    successor, a new pod with no measured use of its own, is filtered as needing 3 cores.
    b (0.6 of 8 cores) has 2.4 cores under 0.9: room for this pod, not for its successor,
    which would wait there; c (0.2 of 8 cores) has room for it."""
    s = settings()
    workload = WorkloadKey("ns", "deployment", "web")
    facts = PodFacts(
        uid="uid-web-1",
        name="web-1",
        namespace="ns",
        scheduler_name="decice_sched",
        cpu_request=0.5,
        node_name="a",
        owners=[{"kind": "ReplicaSet", "name": "web-5d8f", "controller": True}],
        labels={TEMPLATE_HASH: "5d8f"},
    )
    young = RunningPod(facts=facts, owner_kind="ReplicaSet", created=NOW - 120)
    usage = UsageTable(
        workloads={workload: WorkloadUse(3.5, 5, 3.0)},
        pods={("ns", "web-1"): 1.0},
        fetched_at=NOW,
    )
    cores = {"a": 8.0, "b": 8.0, "c": 8.0}

    def moves(values: dict[str, float]) -> list[str]:
        snapshot = replace(make_snapshot({"cpu": values}), usage=usage)
        tables = build_tables(s, snapshot, {}, NOW)
        return [d.target for d in plan(s, [young], tables, snapshot, {}, cores, NOW).moves]

    assert moves({"a": 0.95, "b": 0.6}) == []
    assert moves({"a": 0.95, "b": 0.6, "c": 0.2}) == ["c"]


def test_no_move_to_a_node_without_cpu_left_by_requests() -> None:
    """b has the headroom by its metric, but its 4 allocatable cores are requested by pods
    of ours already: kube-scheduler would not place the successor there; c has CPU left."""
    s = settings()
    hot = running("p", "a", cpu=1.0)
    full = [running(f"b{i}", "b", cpu=1.0) for i in range(4)]
    cores = {"a": 4.0, "b": 4.0, "c": 4.0}
    values = {"cpu": {"a": 0.95, "b": 0.2, "c": 0.5}}
    assert [d.target for d in check(s, [hot, *full], values, cores=cores).moves] == ["c"]
    assert [d.target for d in check(s, [hot, *full[:3]], values, cores=cores).moves] == ["b"]
    # An unknown size is no veto (other schedulers' pods are not listed either).
    unknown = {"a": 4.0, "c": 4.0}
    assert [d.target for d in check(s, [hot, *full], values, cores=unknown).moves] == ["b"]


def test_a_pod_waiting_for_room_takes_it_before_a_move() -> None:
    """b (0.6 of 8 cores) has 2.4 cores under 0.9. A 2-core pod waiting for room would be
    placed there first, so moving a 2-core pod off hot a would leave its successor queued
    behind it: no move. With c (0.55) too, the waiting pod takes c, the best node, and the
    move goes to b."""
    s = settings()
    hot = running("p", "a", cpu=2.0)
    pending = replace(running("w", "", cpu=2.0).facts, uid="uid-waiting")
    cores = {"a": 8.0, "b": 8.0, "c": 8.0}
    two = {"cpu": {"a": 0.95, "b": 0.6}}
    assert [d.target for d in check(s, [hot], two, cores=cores).moves] == ["b"]
    held = check(s, [hot], two, cores=cores, waiting=[pending])
    assert not held.moves
    assert "no other node has headroom for it" in held.decisions[0].reason
    three = {"cpu": {"a": 0.95, "b": 0.6, "c": 0.55}}
    assert [d.target for d in check(s, [hot], three, cores=cores).moves] == ["c"]
    moved = check(s, [hot], three, cores=cores, waiting=[pending]).moves
    assert [d.target for d in moved] == ["b"]
    # A waiting pod that fits nowhere claims nothing.
    huge = replace(pending, cpu_request=16.0)
    assert [d.target for d in check(s, [hot], two, cores=cores, waiting=[huge]).moves] == ["b"]


def unschedulable_pod(
    created: str = "2026-11-23T13:26:23Z", node: str = "", reason: str = "Unschedulable"
) -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": "False", "reason": reason}
    return {
        "metadata": {
            "name": "w-2",
            "namespace": "shop",
            "uid": "u-2",
            "creationTimestamp": created,
        },
        "spec": {"schedulerName": "decice_sched", "nodeName": node, "containers": []},
        "status": {"phase": "Pending", "conditions": [condition]},
    }


def test_waits_for_room_reads_the_schedulers_unschedulable_pods_within_their_wait() -> None:
    created = datetime(2026, 11, 23, 13, 26, 23, tzinfo=UTC).timestamp()
    facts = waits_for_room(unschedulable_pod(), created + 60, 1800)
    assert facts is not None and facts.uid == "u-2"
    assert waits_for_room(unschedulable_pod(), created + 1800, 1800) is None  # overflows now
    assert waits_for_room(unschedulable_pod(node="n1"), created + 60, 1800) is None
    assert waits_for_room(unschedulable_pod(reason="SchedulerError"), created + 60, 1800) is None
    assert waits_for_room({"metadata": {"name": "x"}, "status": {}}, created, 1800) is None
    with pytest.raises(PodError):
        bad = unschedulable_pod()
        bad["metadata"]["namespace"] = 7
        waits_for_room(bad, created + 60, 1800)


def test_of_a_filtered_node_the_pod_that_brings_it_back_under_moves_first() -> None:
    """a (4 cores) is at 1.0, 0.1 over 0.9: of its pods, the smallest that frees 0.4 core
    or more moves (one eviction); failing that, the largest."""
    assert relief(0.125, 0.1) > relief(0.5, 0.1) > relief(0.05, 0.1) > relief(0.01, 0.1)
    s = settings()
    pods = [running(n, "a", cpu=c) for n, c in (("tiny", 0.1), ("fit", 0.5), ("huge", 2.0))]
    moved = check(s, pods, {"cpu": {"a": 1.0, "b": 0.1, "c": 0.1}}).moves
    assert [d.pod.facts.name for d in moved] == ["fit"]


# -- safety ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (running("bare", "a", owner=None), "bare pod (no controller recreates it)"),
        (running("ds", "a", owner="DaemonSet"), "DaemonSet pod"),
        (running("job", "a", owner="Job"), "Job pod"),
        (running("static", "a", owner="Node"), "static pod"),
        (running("mirror", "a", mirror=True), "static pod"),
        (running("pinned", "a", opted_out=True), 'annotation decice.io/rebalance: "false"'),
        (running("young", "a", created=NOW - 30), "younger than minAge 60s"),
        (running("gone", "a", terminating=True), "terminating"),
    ],
)
def test_protected_pods_are_never_candidates(pod: RunningPod, why: str) -> None:
    s = settings()
    assert protection(pod, s.rebalance, NOW) == why
    result = check(s, [pod], {"cpu": {"a": 0.99, "b": 0.0}})
    assert not result.decisions and result.skipped == {why: 1}


def test_statefulset_and_replicaset_pods_may_move() -> None:
    s = settings()
    pods = [running("rs", "a"), running("sts", "b", owner="StatefulSet")]
    result = check(s, pods, {"cpu": {"a": 0.95, "b": 0.95, "c": 0.0, "d": 0.0}})
    assert sorted(d.pod.facts.name for d in result.moves) == ["rs", "sts"]


def test_pods_of_other_schedulers_and_unknown_policies_are_left_alone() -> None:
    s = settings()
    foreign = RunningPod(PodFacts("u", "f", "ns", "default-scheduler", 0.1, "a"), "ReplicaSet", OLD)
    unknown = running("x", "a", policy="gpu")
    result = check(s, [foreign, unknown], {"cpu": {"a": 0.99, "b": 0.0}})
    assert not result.decisions and result.skipped == {"unknown policy": 1}


# -- limits and the herd guard ---------------------------------------------------------------


def test_per_node_and_per_cycle_limits() -> None:
    s = settings({"maxEvictionsPerCycle": 3, "maxEvictionsPerNode": 2})
    pods = [running(f"a{i}", "a") for i in range(3)] + [running(f"b{i}", "b") for i in range(3)]
    nodes = {"a": 0.95, "b": 0.95} | {f"cool{i}": 0.0 for i in range(6)}
    result = check(s, pods, {"cpu": nodes}, cores={n: 64 for n in nodes})
    moved = [d.pod.facts.node_name for d in result.moves]
    assert len(moved) == 3 and max(moved.count("a"), moved.count("b")) == 2
    assert len([d for d in result.decisions if d.outcome == "held"]) == 3


def test_one_hot_node_does_not_empty_onto_one_cool_node() -> None:
    # Ten 1-core pods on a hot node; one cool 8-core node, one lukewarm. Each planned move
    # adds an eighth of the cool node's cores to it: after four, it is no better.
    s = settings({"maxEvictionsPerCycle": 10, "maxEvictionsPerNode": 10})
    pods = [running(f"p{i}", "hot", cpu=1.0) for i in range(10)]
    values = {"cpu": {"hot": 0.95, "cool": 0.0, "warm": 0.45}}
    cores = {"hot": 16.0, "cool": 8.0, "warm": 8.0}
    result = check(s, pods, values, cores=cores)
    targets = [d.target for d in result.moves]
    assert 0 < targets.count("cool") <= 4
    assert len(result.moves) < 10  # the rest wait for fresh metrics
    herdless = settings(
        {"maxEvictionsPerCycle": 10, "maxEvictionsPerNode": 10}, herdGuard={"enabled": False}
    )
    blind = check(herdless, pods, values, cores=cores)
    # What the guard prevents: without it only cool's allocatable CPU (8 cores) stops them.
    assert [d.target for d in blind.moves] == ["cool"] * 8 + ["warm"] * 2


# -- reading pods ----------------------------------------------------------------------------


def test_read_running_pod_from_the_api() -> None:
    doc = {
        "metadata": {
            "name": "w-1",
            "namespace": "shop",
            "uid": "u-1",
            "creationTimestamp": "2026-11-23T13:26:23Z",
            "annotations": {"decice.io/rebalance": "false", "decice.io/policy": "web"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "w", "controller": True, "uid": "r"},
            ],
            "deletionTimestamp": "2026-11-23T13:30:00Z",
        },
        "spec": {"schedulerName": "decice_sched", "nodeName": "n1", "containers": []},
        "status": {"phase": "Running"},
    }
    pod = read_running_pod(doc)
    assert pod.owner_kind == "ReplicaSet" and pod.opted_out and pod.terminating
    created = datetime(2026, 11, 23, 13, 26, 23, tzinfo=UTC).timestamp()
    assert pod.created == created and pod.facts.policy == "web"
    mirror = read_running_pod(
        {"metadata": {"name": "s", "annotations": {"kubernetes.io/config.mirror": "x"}}}
    )
    assert mirror.mirror and mirror.owner_kind is None and mirror.created is None


# -- pods the API would refuse, and refusals ---------------------------------------------------


def test_a_pod_its_budget_guards_is_held_and_the_movable_pod_beside_it_moves() -> None:
    # The story: node-2 hot; on it a ReplicaSet pod, a bare pod, and a ReplicaSet
    # pod whose PodDisruptionBudget allows no disruption (known from the budget list).
    s = settings(rebalance={"maxEvictionsPerNode": 1})
    guarded = running("guarded-hot", "node-2")
    movable = running("movable", "node-2")
    bare = running("bare", "node-2", owner=None)
    values = {"cpu": {"node-1": 0.2, "node-2": 0.95}}
    hold = {guarded.facts.uid: "PodDisruptionBudget guarded allows no disruption now"}
    snapshot = make_snapshot(values)
    result = plan(s, [guarded, movable, bare], build_tables(s, snapshot, {}, NOW), snapshot,
                  {}, {}, NOW, hold)  # fmt: skip
    assert [d.pod.facts.name for d in result.moves] == ["movable"]
    [held] = [d for d in result.decisions if d.outcome == "held"]
    assert held.pod is guarded and held.reason.endswith("allows no disruption now")
    assert result.streaks == {guarded.facts.uid: 1}  # still due: its streak is kept
    assert result.skipped == {"bare pod (no controller recreates it)": 1}


def test_a_refused_move_leaves_its_nodes_slot_to_the_next_pod() -> None:
    s = settings(rebalance={"maxEvictionsPerNode": 1, "maxEvictionsPerCycle": 5})
    first, second = running("first", "hot"), running("second", "hot")
    snapshot = make_snapshot({"cpu": {"cool": 0.1, "hot": 0.95}})
    tables = build_tables(s, snapshot, {}, NOW)

    result = plan(s, [first, second], tables, snapshot, {}, {}, NOW, admit=False)
    moves = result.limits
    assert [d.pod.facts.name for d in result.due] == ["first", "second"]
    # The API refuses the first: nothing was made, the node's one slot is free.
    assert moves.admit(result.due[0]).outcome == "move"
    assert moves.admit(result.due[1]).outcome == "move"
    # Made, it uses the slot: the next pod on that node is held.
    moves.made(result.due[1])
    held = moves.admit(result.due[0])
    assert held.outcome == "held" and "maxEvictionsPerNode reached on hot" in held.reason
