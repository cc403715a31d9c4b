"""Nominated pods in the herd guard (decisions.state.DecisionState.nominate): a pod
kube-scheduler nominated to a node (a preemptor whose victims are leaving) counts there
until it is bound or its nomination is cleared; its own filter does not count it against
its node; and an in-place resize moves what a held pod counts at (`resized`)."""

from __future__ import annotations

from typing import Any

import orjson

from extender.cluster.podwatch import PodEventHandler
from extender.decisions.assignments import Nominated, Waiting, pod_change
from extender.decisions.engine import Engine
from extender.decisions.held import TENTATIVE_SECONDS
from extender.decisions.pods import PodFacts
from extender.decisions.wire import (
    PreemptionArgs,
    encode_filter,
    parse_extender_args,
    parse_preemption_args,
)
from tests.harness.fixtures import APISERVER, NOW, make_settings, make_snapshot

CPU = {"n1": 0.3, "n2": 0.4}
GUARD = {"settle": 45, "window": 60, "waitForRoom": 0, "estimate": "request"}


def engine() -> Engine:
    settings = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.85}}], herdGuard=GUARD)
    e = Engine(settings, make_snapshot({"cpu": CPU}), NOW)
    e.set_node_cores({"n1": 8.0, "n2": 8.0})
    return e


def pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def passed(e: Engine, name: str, cpu: str, now: float = NOW) -> list[str]:
    args = parse_extender_args(orjson.dumps({"Pod": pod(name, cpu), "NodeNames": ["n1", "n2"]}))
    kept: list[str] = orjson.loads(encode_filter(args, e.filter(args, now)))["NodeNames"] or []
    return kept


def facts(name: str, cpu: float) -> PodFacts:
    return PodFacts(f"u-{name}", name, "ns", "decice_sched", cpu)


def test_a_nominated_pod_keeps_its_room_from_the_next_pod() -> None:
    """urgent (3 cores) is nominated to n1 (0.3): the next 3-core pod would take n1 to
    0.3 + 3/8 + 3/8 = 1.05, so it goes to n2 (0.4 + 0.375); urgent itself still passes n1."""
    e = engine()
    assert passed(e, "next", "3") == ["n1", "n2"]  # before: both have room
    assert e.nominate("u-urgent", "n1", facts("urgent", 3.0), NOW)
    assert e.reservations["u-urgent"].source == "nominated"
    assert passed(e, "next", "3") == ["n2"]
    assert passed(e, "urgent", "3") == ["n1", "n2"]  # not counted against its own node


def test_a_bind_turns_the_nomination_into_a_placement_and_a_clear_frees_the_room() -> None:
    e = engine()
    e.nominate("u-urgent", "n1", facts("urgent", 3.0), NOW)
    e.nominate("u-urgent", "n1", facts("urgent", 3.0), NOW + 1)  # the same: nothing moves
    assert e.reservations["u-urgent"].bound_at == NOW
    assert e.reserve("u-urgent", "n1", 3.0, NOW + 2, source="bind")
    held = e.reservations["u-urgent"]
    assert (held.source, held.bound_at) == ("bind", NOW + 2)
    assert not e.unnominate("u-urgent", NOW + 3)  # bound: a cleared nomination frees nothing

    e.nominate("u-other", "n2", facts("other", 2.0), NOW)
    e.nominate("u-other", "n1", facts("other", 2.0), NOW + 1)  # nominated elsewhere now
    assert e.reservations["u-other"].node == "n1"
    assert e.unnominate("u-other", NOW + 2)
    assert "u-other" not in e.reservations


def test_a_resize_moves_what_a_held_pod_counts_at() -> None:
    e = engine()
    e.reserve("u-web", "n1", 1.0, NOW, source="watch", pod=facts("web", 1.0))
    assert e.herd()["n1"] == 1.0 / 8
    assert e.resized("u-web", facts("web", 3.0), NOW + 5)
    held = e.reservations["u-web"]
    assert (held.cores, held.bound_at, held.source) == (3.0, NOW, "watch")  # same placement
    assert e.herd()["n1"] == 3.0 / 8
    assert not e.resized("u-web", facts("web", 3.0), NOW + 6)  # the same figure
    assert not e.resized("u-gone", facts("gone", 3.0), NOW + 6)  # held by nobody


def test_the_api_servers_nominated_pod_reads_as_nominated() -> None:
    doc = orjson.loads((APISERVER / "pod-status-nominated.json").read_bytes())["response"]
    change = pod_change("MODIFIED", doc)
    assert isinstance(change, Nominated) and (change.node, change.cores) == ("node-1", 2.0)
    del doc["status"]["nominatedNodeName"]
    assert pod_change("MODIFIED", doc) == Waiting(doc["metadata"]["uid"])
    bound = orjson.loads((APISERVER / "get-pod-bound-after-nomination.json").read_bytes())
    # Bound: the API server cleared the nomination (ClearingNominatedNodeNameAfterBinding).
    assert "nominatedNodeName" not in bound["response"]["status"]


def preemption(victims: dict[str, list[str]]) -> PreemptionArgs:
    meta = {
        n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
        for n, uids in victims.items()
    }
    body = {"Pod": pod("urgent", "3"), "NodeNameToMetaVictims": meta}
    return parse_preemption_args(orjson.dumps(body))


def test_preempt_counts_the_preemptor_at_once_on_the_one_node_it_leaves() -> None:
    """The scheduler nominates the preemptor to a node /preempt kept: when only one is
    left, that is the node, and the next pod's filter may come before the pod watch shows
    the nomination (its events come a batch late)."""
    e = engine()
    assert e.reserve("u-fill", "n1", 7.0, NOW, source="watch")
    assert e.reserve("u-hot", "n2", 6.0, NOW, source="watch")
    kept = e.preempt(preemption({"n1": ["u-fill"], "n2": ["other"]}), NOW)
    assert list(kept) == ["n1"]  # n2: 0.4 + 6/8 + 3/8 even without "other"
    held = e.reservations["u-urgent"]
    assert (held.node, held.source, held.cores) == ("n1", "nominated", 3.0)
    e.release("u-fill", NOW)  # the victim is gone
    e.release("u-hot", NOW)  # and n2's pod has finished
    # n1 keeps the preemptor's room: 0.3 + 3/8 + 3/8 for the next 3-core pod; n2 has room.
    assert passed(e, "next", "3") == ["n2"]
    assert passed(e, "urgent", "3") == ["n1", "n2"]


def test_with_several_nodes_left_the_pod_watch_tells_which() -> None:
    e = engine()
    kept = e.preempt(preemption({"n1": ["a"], "n2": ["b"]}), NOW)
    assert set(kept) == {"n1", "n2"} and "u-urgent" not in e.reservations


def watch_pod(status: dict[str, Any]) -> dict[str, Any]:
    doc = pod("urgent", "3")
    doc["metadata"]["resourceVersion"] = "7"
    doc["status"] = status
    return doc


def test_an_event_older_than_the_nomination_does_not_undo_it() -> None:
    """/preempt counted urgent on n1; the watch, a batch late, then delivers urgent's
    creation (no nomination yet): that is older news, and the room stays. Once the watch
    has shown the nomination, its clearing frees the room."""
    e = engine()
    handler = PodEventHandler(e, clock=lambda: NOW)
    e.preempt(preemption({"n1": ["gone"]}), NOW)
    assert e.reservations["u-urgent"].source == "nominated"
    handler("ADDED", watch_pod({"phase": "Pending"}))
    assert "u-urgent" in e.reservations
    handler("MODIFIED", watch_pod({"phase": "Pending", "nominatedNodeName": "n1"}))
    handler("MODIFIED", watch_pod({"phase": "Pending"}))  # the scheduler cleared it
    assert "u-urgent" not in e.reservations


def test_a_nomination_the_pod_watch_never_confirms_frees_its_room() -> None:
    """/preempt left one node, but the scheduler never nominated the pod (another extender
    dropped the node, the preemption failed, or the pod does not exist): the room is held
    TENTATIVE_SECONDS, then freed at the next verb; one the watch confirmed stays."""
    e = engine()
    e.preempt(preemption({"n1": ["gone"]}), NOW)
    assert "u-urgent" in e.reservations
    assert "n1" not in passed(e, "next", "3", NOW + TENTATIVE_SECONDS - 0.1)
    assert "n1" in passed(e, "next", "3", NOW + TENTATIVE_SECONDS)
    assert "u-urgent" not in e.reservations

    e.preempt(preemption({"n1": ["gone"]}), NOW)
    e.nominate("u-urgent", "n1", facts("urgent", 3.0), NOW + 0.2)  # the watch shows it
    passed(e, "next", "3", NOW + 10)
    assert e.reservations["u-urgent"].source == "nominated"
