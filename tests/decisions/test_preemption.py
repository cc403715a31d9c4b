"""extender.decisions.preemption: each candidate node judged as it would be after its victims
leave (their herd reservations off, the preemptor's request on), through Engine.preempt."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from extender.decisions.engine import Engine
from extender.decisions.model import NodeInventory
from extender.decisions.pods import PodFacts, PodMemo, Preemptions
from extender.decisions.preemption import victim_uids
from extender.decisions.resources import cpu_cores
from extender.decisions.usage import UsageTable
from extender.decisions.wire import (
    PreemptionArgs,
    encode_filter,
    parse_extender_args,
    parse_preemption_args,
)
from tests.harness.fixtures import NOW, make_settings, make_snapshot

# 8-core nodes; "hot" is over the 0.9 threshold on what Prometheus measures.
CPU = {"n1": 0.3, "n2": 0.3, "n3": 0.5, "hot": 0.95, "busy": 0.8}
CORES = dict.fromkeys(CPU, 8.0)


def engine(**policy: Any) -> Engine:
    raw: dict[str, Any] = {"metrics": [{"name": "cpu", "filter": {"above": 0.9}}]}
    raw.update(policy)
    e = Engine(make_settings(**raw), make_snapshot({"cpu": CPU}), NOW)
    e.set_node_cores(CORES)
    return e


def preemption(victims: dict[str, list[str]], cpu: str = "2") -> PreemptionArgs:
    """What the scheduler sends: the preemptor and, per candidate node, its victims."""
    pod = {
        "metadata": {"name": "urgent", "namespace": "ns", "uid": "u-urgent"},
        "spec": {
            "schedulerName": "decice_sched",
            "priority": 1000,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    meta = {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
        for node, uids in victims.items()
    }
    return parse_preemption_args(orjson.dumps({"Pod": pod, "NodeNameToMetaVictims": meta}))


def test_victims_the_watch_saw_placed_a_moment_ago_no_longer_block_their_node() -> None:
    # The story of the issue: fillers placed by a burst fill n1 and n2 (7.8 of 8 cores
    # reserved), so the filter rejects both now; the urgent pod must still preempt.
    e = engine()
    assert e.reserve("fill-1", "n1", 7.8, NOW, source="watch")
    assert e.reserve("fill-2", "n2", 7.8, NOW, source="watch")
    assert not e.table(NOW).passes("n1") and not e.table(NOW).passes("n2")

    kept = e.preempt(preemption({"n1": ["fill-1"], "n2": ["fill-2"]}), NOW)

    # After its victim leaves, n1 holds 0.3 measured + 2/8 for the preemptor = 0.55.
    assert kept == {
        "n1": {"Pods": [{"UID": "fill-1"}], "NumPDBViolations": 0},
        "n2": {"Pods": [{"UID": "fill-2"}], "NumPDBViolations": 0},
    }
    # Judging changes nothing: the reservations stay until the pods are really gone.
    assert not e.table(NOW).passes("n1")
    assert set(e.reservations) == {"fill-1", "fill-2"}


def filter_for_urgent(e: Engine, names: list[str], now: float) -> list[str]:
    """The nodes our filter passes for the preemptor of `preemption` (2 cores)."""
    pod = {
        "metadata": {"name": "urgent", "namespace": "ns", "uid": "u-urgent"},
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        },
    }
    args = parse_extender_args(orjson.dumps({"Pod": pod, "NodeNames": names}))
    kept: list[str] = orjson.loads(encode_filter(args, e.filter(args, now)))["NodeNames"]
    return kept


def test_the_preemptor_passes_where_its_victims_are_leaving_before_the_watch_sees_it() -> None:
    """Measured on the real chain: the scheduler asks the filter again 3 ms after deleting
    the victims; judged on the table (their reservations still on), the chosen node failed
    and the scheduler preempted on the next node, and the next. The nodes /preempt accepted
    pass the preemptor's filter as /preempt judged them, and only for it, only a while."""
    e = engine()
    for i, node in enumerate(("n1", "n2", "busy"), 1):
        assert e.reserve(f"fill-{i}", node, 7.0, NOW, source="bind")
    names = ["n1", "n2", "busy", "hot"]
    assert filter_for_urgent(e, names, NOW) == []
    kept = e.preempt(preemption({"n1": ["fill-1"], "n2": ["fill-2"], "busy": ["fill-3"]}), NOW)
    assert set(kept) == {"n1", "n2"}  # busy: 0.8 + 2/8 even without its victim
    assert filter_for_urgent(e, names, NOW + 0.003) == ["n1", "n2"]
    assert set(e.reservations) == {"fill-1", "fill-2", "fill-3"}  # nothing released
    assert not e.table(NOW).passes("n1")  # every other pod still sees the reservations
    # Remembered for a while (the snapshot is too old by then to judge by), then forgotten.
    remembered = e.preemptions.get("u-urgent", NOW + 300)
    assert remembered is not None and set(remembered.victims) == {"n1", "n2"}
    assert e.preemptions.get("u-urgent", NOW + 301) is None


def test_preemptions_are_bounded() -> None:
    memory = Preemptions(seconds=10, pods=2)
    for uid in ("a", "b", "c"):
        memory.remember(uid, {"n": {}}, NOW)
    kept = memory.get("c", NOW)
    assert len(memory) == 2 and memory.get("a", NOW) is None
    assert kept is not None and kept.victims == {"n": {}}
    memory.remember("c", {}, NOW)  # nothing accepted: nothing to remember
    assert memory.get("c", NOW) is None and len(memory) == 1
    assert memory.get("b", NOW + 11) is None and len(memory) == 0


def test_only_the_named_victims_leave() -> None:
    e = engine()
    e.reserve("fill-a", "n1", 3.9, NOW, source="watch")
    e.reserve("fill-b", "n1", 3.9, NOW, source="bind")
    # One of two fillers leaves: 0.3 + 3.9/8 + 2/8 = 1.04 > 0.9, the node stays rejected.
    assert e.preempt(preemption({"n1": ["fill-a"]}), NOW) == {}
    # Both leave: 0.55.
    assert set(e.preempt(preemption({"n1": ["fill-a", "fill-b"]}), NOW)) == {"n1"}
    # A victim whose reservation sits on another node frees nothing here.
    e.reserve("elsewhere", "n3", 4.0, NOW, source="watch")
    assert e.preempt(preemption({"n1": ["elsewhere"]}), NOW) == {}


def test_victims_without_reservations_and_measured_load() -> None:
    # Old pods carry no reservation (a fresh snapshot covers them): their node is judged
    # on what Prometheus measures plus the preemptor.
    e = engine()
    kept = e.preempt(preemption({"n3": ["old-1"], "hot": ["old-2"]}), NOW)
    assert set(kept) == {"n3"}  # 0.5 + 0.25; "hot" stays rejected whatever the victims


def test_the_preemptors_own_request_counts() -> None:
    e = engine()
    # busy: 0.8 measured; a 2-core preemptor brings it to 1.05, a 0.5-core one to 0.86.
    assert e.preempt(preemption({"busy": ["old"]}, cpu="2"), NOW) == {}
    assert set(e.preempt(preemption({"busy": ["old"]}, cpu="500m"), NOW)) == {"busy"}


def test_without_a_herd_guard_the_table_decides() -> None:
    e = engine(herdGuard={"enabled": False})
    kept = e.preempt(preemption({"busy": ["old"], "hot": ["old"], "zz": ["old"]}), NOW)
    assert set(kept) == {"busy", "zz"}  # zz: unknown to the snapshot, fail-open passes


def test_victim_uids_reads_only_well_formed_entries() -> None:
    assert victim_uids({"Pods": [{"UID": "a"}, {"UID": 3}, "x", {}], "NumPDBViolations": 0}) == [
        "a"
    ]
    assert victim_uids(None) == [] and victim_uids({"Pods": None}) == []


def usage_engine(pods: dict[tuple[str, str], float], **policy: Any) -> Engine:
    """`engine()` with a 45 s settle, a 60 s window, and the pods' own measured use."""
    e = engine(herdGuard={"settle": 45, "window": 60}, **policy)
    usage = UsageTable(pods=pods, fetched_at=NOW)
    e.install(replace(make_snapshot({"cpu": CPU}), usage=usage), None, NOW)
    return e


def test_a_victim_the_metric_shows_takes_its_measured_use_off() -> None:
    """busy (0.8 measured) runs an old victim that uses 4 of its 8 cores: without the
    victim it is at 0.3, and a 2-core preemptor fits (0.55). Its measured use comes off
    only when we know it; a victim we know nothing of leaves the node as measured."""
    e = usage_engine({("ns", "old"): 4.0})
    e.pods.remember(memo_of("old", "ns"))
    assert set(e.preempt(preemption({"busy": ["old"]}), NOW)) == {"busy"}
    assert e.preempt(preemption({"busy": ["stranger"]}), NOW) == {}


def test_a_victim_counted_at_its_request_takes_only_its_reservation_off() -> None:
    """Without a measurement the metric's share of the victim is not guessed from its
    request: the node is never judged cooler than we can show."""
    e = usage_engine({})
    e.pods.remember(memo_of("old", "ns", cpu="4"))
    assert e.preempt(preemption({"busy": ["old"]}), NOW) == {}


def test_a_victim_half_shown_half_reserved_takes_both_halves_off() -> None:
    """Placed settle + 30 s ago: a 1-minute rate shows half of its 4 cores (0.25 of the
    node), its reservation holds the other half. n3 (0.5 measured, 0.75 with the
    reservation): 0.5 - 0.25 + 2/8 = 0.5 once it leaves; with only its reservation off,
    0.75, and a 3.5-core preemptor would not fit (0.94)."""
    e = usage_engine({("ns", "half"): 4.0})
    assert e.reserve(
        "half",
        "n3",
        4.0,
        NOW,
        source="watch",
        pod=facts_of("half", "ns", 4.0),
        assigned_at=NOW - 45 - 30,
    )
    assert e.herd()["n3"] == pytest.approx(0.25)
    assert set(e.preempt(preemption({"n3": ["half"]}, cpu="3500m"), NOW)) == {"n3"}


def test_a_node_of_unknown_size_is_judged_on_the_metric_alone() -> None:
    """Sizes come from the node watch: a node it has not listed has no size, and nothing
    resting on one vetoes it (the preemptor's share, reservations); its measured load does."""
    e = Engine(
        make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9}}]),
        make_snapshot({"cpu": {**CPU, "new": 0.5}}),
        NOW,
    )
    e.watch_sizes(NOW)
    e.nodes_changed(NodeInventory(cpu_cores={"n1": 8.0}), (), NOW)
    assert e.reserve("fill", "new", 7.8, NOW, source="watch")
    assert e.table(NOW).passes("new")  # its reservation is a share of nothing yet
    # 6 cores: on a 4-core guess (herdGuard.defaultNodeCores) 0.5 + 1.5, refused before.
    assert set(e.preempt(preemption({"new": ["fill"], "hot": ["x"]}, cpu="6"), NOW)) == {"new"}
    e.nodes_changed(NodeInventory(cpu_cores={"n1": 8.0, "new": 8.0}), (), NOW)  # its size
    assert not e.table(NOW).passes("new")
    assert e.preempt(preemption({"new": ["other"]}, cpu="6"), NOW) == {}


def test_the_preemptors_retry_sees_the_victims_use_fade_from_the_metric() -> None:
    """After the victims are deleted the metric shows them less and less: the preemptor's
    retried filter takes off what it still shows, not more."""
    e = usage_engine({("ns", "old"): 4.0})
    e.pods.remember(memo_of("old", "ns"))
    assert set(e.preempt(preemption({"busy": ["old"]}), NOW)) == {"busy"}
    assert filter_for_urgent(e, ["busy"], NOW + 1) == ["busy"]
    # settle + window after the deletion the metric shows none of it: busy is as measured.
    later = replace(make_snapshot({"cpu": CPU}, NOW + 110), usage=e.snapshot.usage)
    e.install(later, None, NOW + 110)
    assert filter_for_urgent(e, ["busy"], NOW + 110) == []


def facts_of(name: str, namespace: str, cpu: float | None) -> PodFacts:
    return PodFacts(f"u-{name}", name, namespace, "decice_sched", cpu)


def memo_of(name: str, namespace: str, cpu: str = "1") -> PodMemo:
    """What our filter call kept of a pod (its UID is the name, as the victims name it)."""
    return PodMemo(
        facts=PodFacts(name, name, namespace, "decice_sched", cpu_cores(cpu)), rejected=frozenset()
    )
