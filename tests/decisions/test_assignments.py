"""extender.decisions.assignments and extender.cluster.podwatch: pod watch events ->
herd-guard reservations, releases and requeue bookkeeping, on the real API server's
captured watch stream."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import orjson
import pytest

from extender.cluster.podwatch import PodEventHandler
from extender.decisions.assignments import (
    Assigned,
    AssignmentLog,
    Released,
    Waiting,
    is_recent,
    pod_change,
)
from extender.decisions.engine import Engine
from extender.decisions.turnedaway import TurnedAwayPods
from extender.decisions.wire import parse_extender_args
from tests.harness.fixtures import APISERVER, make_settings, make_snapshot

STREAM = orjson.loads((APISERVER / "watch-pods.json").read_bytes())["events"]
# The captured stream: created, bound to node-1 at 13:26:11Z, annotated, deleting, deleted.
BOUND_AT = datetime.datetime(2026, 11, 23, 13, 26, 11, tzinfo=datetime.UTC).timestamp()


def event(i: int) -> tuple[str, Any]:
    e = STREAM[i]
    return e["type"], copy.deepcopy(e["object"])


def test_the_captured_stream_reads_as_waiting_assigned_released() -> None:
    changes = [pod_change(*event(i)) for i in range(5)]
    uid = STREAM[0]["object"]["metadata"]["uid"]
    assert changes[0] == Waiting(uid)
    assert isinstance(changes[1], Assigned)
    assert changes[1].node == "node-1" and changes[1].uid == uid
    assert changes[1].cores == 0.25  # the fixture's container asks for 250m
    assert changes[1].assigned_at == BOUND_AT
    assert changes[3] == Released(uid)  # deletionTimestamp set: it holds nothing any more
    gone = changes[4]  # DELETED: it stopped on node-1, which the metric still shows it on
    assert isinstance(gone, Released) and gone.uid == uid and gone.gone is not None
    assert (gone.gone.node_name, gone.gone.cpu_request, gone.gone.name) == ("node-1", 0.25, "w1")


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_is_released(phase: str) -> None:
    kind, pod = event(1)
    pod["status"]["phase"] = phase
    change = pod_change(kind, pod)
    assert isinstance(change, Released) and change.gone is not None  # it ran on node-1
    assert change.gone.node_name == "node-1"


def test_a_pod_created_with_its_node_counts_from_its_creation() -> None:
    _, pod = event(1)
    pod["status"]["conditions"] = []
    change = pod_change("ADDED", pod)
    assert isinstance(change, Assigned)
    assert (
        change.assigned_at
        == datetime.datetime.fromisoformat(
            pod["metadata"]["creationTimestamp"].replace("Z", "+00:00")
        ).timestamp()
    )


@pytest.mark.parametrize(
    "pod",
    [None, [], {}, {"metadata": {}}, {"metadata": {"uid": 7}}, {"metadata": "x"}],
)
def test_unreadable_objects_mean_nothing(pod: Any) -> None:
    assert pod_change("MODIFIED", pod) is None


def test_a_bad_cpu_request_counts_with_the_default() -> None:
    kind, pod = event(1)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    change = pod_change(kind, pod)
    assert isinstance(change, Assigned) and change.cores is None


def test_only_recent_assignments_count() -> None:
    change = pod_change(*event(1))
    assert isinstance(change, Assigned)
    assert is_recent(change, BOUND_AT + 30, span=30)
    assert is_recent(change, BOUND_AT + 34, span=30)  # within the clock-skew allowance
    assert not is_recent(change, BOUND_AT + 60, span=30)  # a running pod's later update
    assert not is_recent(Assigned("u", "ns", "p", "n", 1.0, None), BOUND_AT, span=30)


def test_the_assignment_log_counts_a_uid_once_within_its_window_and_stays_bounded() -> None:
    log = AssignmentLog(keep=10, capacity=3)
    assert log.first_time("a", 0) and not log.first_time("a", 5)
    assert log.first_time("a", 11)  # the window passed
    for i, uid in enumerate("bcde"):
        log.first_time(uid, 12 + i)
    assert len(log) == 3


# -- the handler: engine state from events -----------------------------------------------


def handler_for(
    settle: float = 30, requeue: bool = True
) -> tuple[Engine, PodEventHandler, list[str], list[str]]:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
        herdGuard={"settle": settle, "defaultNodeCores": 4},
    )
    engine = Engine(
        settings,
        make_snapshot({"cpu": {"node-1": 0.5, "node-2": 0.5}}, fetched_at=BOUND_AT - 5),
        BOUND_AT,
        TurnedAwayPods(100, 600) if requeue else None,
    )
    forgotten: list[str] = []
    placed: list[str] = []
    handler = PodEventHandler(
        engine, forget=forgotten.append, placed=placed.append, clock=lambda: BOUND_AT + 1
    )
    return engine, handler, forgotten, placed


def test_a_pod_bound_by_any_binder_is_reserved_once_and_released_when_deleted() -> None:
    engine, handler, forgotten, _ = handler_for()
    uid = STREAM[0]["object"]["metadata"]["uid"]
    handler(*event(0))
    assert not engine.reservations
    handler(*event(1))
    reservation = engine.reservations[uid]
    assert (reservation.node, reservation.cores, reservation.source) == ("node-1", 0.25, "watch")
    assert engine.herd() == {"node-1": 0.25 / 4}
    assert engine.table(BOUND_AT + 1).scores["node-1"] < engine.table(BOUND_AT + 1).scores["node-2"]
    handler(*event(2))  # the annotation update counts nothing twice
    assert len(engine.reservations) == 1 and engine.herd() == {"node-1": 0.25 / 4}
    handler(*event(3))
    assert not engine.reservations and engine.herd() == {}
    assert uid in forgotten


def test_our_own_bind_and_its_watch_event_reserve_once() -> None:
    engine, handler, _, _ = handler_for()
    uid = STREAM[0]["object"]["metadata"]["uid"]
    assert engine.reserve(uid, "node-1", 0.25, BOUND_AT, source="bind")
    handler(*event(1))
    assert len(engine.reservations) == 1 and engine.reservations[uid].source == "bind"
    assert engine.herd() == {"node-1": 0.25 / 4}  # counted once


def test_an_old_pods_update_reserves_nothing() -> None:
    engine, _, _, _ = handler_for()
    late = PodEventHandler(engine, clock=lambda: BOUND_AT + 600)
    late(*event(2))
    assert not engine.reservations


def test_a_pod_of_ours_bound_by_another_binder_is_recorded_and_gets_its_event() -> None:
    engine, handler, _, placed = handler_for()
    kind, pod = event(1)
    uid = pod["metadata"]["uid"]
    pod["spec"]["schedulerName"] = "decice_sched"
    request = {"Pod": pod | {"spec": pod["spec"] | {"nodeName": ""}}, "NodeNames": ["node-1"]}
    engine.filter(parse_extender_args(orjson.dumps(request)), BOUND_AT)
    handler(kind, pod)
    memo = engine.pods.get(uid)
    assert memo is not None and memo.node == "node-1"
    assert placed == [uid]
    handler(*event(2))
    assert placed == [uid]  # once


def test_a_turned_away_pod_is_forgotten_once_bound() -> None:
    engine, handler, forgotten, _ = handler_for()
    assert engine.turned_away is not None
    uid = STREAM[0]["object"]["metadata"]["uid"]
    engine.turned_away.remember(uid, "decice", "w1", ["node-1"], BOUND_AT)
    handler(*event(1))
    assert uid not in engine.turned_away and forgotten == [uid]
