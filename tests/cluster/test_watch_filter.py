"""extender.cluster.watch_filter: the pod watch drops, undecoded, the lines that change nothing
the service keeps; what it keeps leaves the service in the same state as decoding them
all. Lines as a real kube-apiserver v1.36.2 wrote them (fixture watch-pods.json), and a
seeded stream of many pods' lives through the handler with and without the filter."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from extender.cluster.podwatch import PodEventHandler
from extender.cluster.watch_filter import PodWatchFilter
from extender.decisions.engine import Engine
from extender.decisions.model import Snapshot
from extender.decisions.usage import UsageTable
from tests.harness.fixtures import make_settings

APISERVER = Path(__file__).resolve().parents[1] / "fixtures" / "kube-apiserver"
STREAM: list[dict[str, Any]] = orjson.loads((APISERVER / "watch-pods.json").read_bytes())["events"]
NOW = 1_800_000_000.0


def line(event: dict[str, Any]) -> bytearray:
    """One event as the API server writes it (keys in order, no spaces)."""
    return bytearray(orjson.dumps(event))


def test_the_captured_stream_keeps_what_the_handler_uses_and_reads_every_version() -> None:
    watch_filter = PodWatchFilter()
    kept = []
    for event in STREAM:
        if watch_filter(line(event)):
            kept.append(event)
        assert watch_filter.version == event["object"]["metadata"]["resourceVersion"]
        if event["type"] != "BOOKMARK" and event["object"]["spec"].get("nodeName"):
            watch_filter.settle(event["object"]["metadata"]["uid"])  # as the handler does
    # Created (pending): dropped. Bound: kept (a new assignment). Annotated while bound:
    # dropped. Marked for deletion, then deleted: kept. The bookmark: kept.
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in kept] == [
        ("MODIFIED", "219"),
        ("MODIFIED", "221"),
        ("DELETED", "222"),
        ("BOOKMARK", "222"),
    ]
    assert watch_filter.dropped == 2


def pod(uid: str, rv: int, node: str | None, phase: str = "Running", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
        "schedulerName": "default-scheduler",
    }
    if node is not None:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if node is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": meta.pop("at")}
        ]
    metadata = {
        "name": f"p-{uid}",
        "namespace": "ns",
        "uid": uid,
        "resourceVersion": str(rv),
        "generation": meta.pop("generation", 1),
    }
    metadata.update(meta)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": status}


def stamp(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def lives(seed: int, pods: int) -> list[dict[str, Any]]:
    """A seeded stream: pods created pending, nominated to a node and not any more,
    assigned (recently or long ago), updated many times while running, resized in place
    (a new request, the generation bumped), marked for deletion or finished, deleted."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    rv = 100
    state: dict[str, dict[str, Any]] = {}
    for i in range(pods):
        uid = f"{seed:02d}-{i:04d}-aaaa"
        rv += 1
        state[uid] = pod(uid, rv, None, phase="Pending")
        events.append({"type": "ADDED", "object": state[uid]})
    for _ in range(pods * 12):
        uid = rng.choice(sorted(state))
        current = state[uid]
        rv += 1
        node = current["spec"].get("nodeName")
        roll = rng.random()
        if node is None and roll < 0.4:
            at = NOW - rng.choice((2.0, 10.0, 5_000.0))  # recent, or assigned long ago
            new = pod(uid, rv, f"node-{rng.randrange(5)}", at=stamp(at))
        elif node is None and roll < 0.55:  # nominated (a preemptor), moved, or cleared
            new = orjson.loads(orjson.dumps(current))
            new["metadata"]["resourceVersion"] = str(rv)
            if new["status"].pop("nominatedNodeName", None) is None or rng.random() < 0.5:
                new["status"]["nominatedNodeName"] = f"node-{rng.randrange(5)}"
        elif node is not None and roll < 0.48:  # resized in place through pods/resize
            new = orjson.loads(orjson.dumps(current))
            new["metadata"]["resourceVersion"] = str(rv)
            new["metadata"]["generation"] += 1
            cpu = rng.choice(("100m", "250m", "1", "2"))
            new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        elif roll < 0.8:  # a status report: nothing changes but the version
            new = orjson.loads(orjson.dumps(current))
            new["metadata"]["resourceVersion"] = str(rv)
        elif roll < 0.9:
            new = orjson.loads(orjson.dumps(current))
            new["metadata"]["resourceVersion"] = str(rv)
            new["status"]["phase"] = rng.choice(("Succeeded", "Failed"))
        elif roll < 0.95:
            new = orjson.loads(orjson.dumps(current))
            new["metadata"]["resourceVersion"] = str(rv)
            new["metadata"]["deletionTimestamp"] = stamp(NOW)
        else:
            events.append({"type": "DELETED", "object": current})
            del state[uid]
            if not state:
                break
            continue
        state[uid] = new
        events.append({"type": "MODIFIED", "object": new})
    return events


def handler_and_log() -> tuple[PodEventHandler, Engine, list[str]]:
    settings = make_settings(
        metrics=[{"name": "cpu"}], herdGuard={"settle": 30}, explain={"events": False}
    )
    engine = Engine(settings, Snapshot.empty(["cpu"]), NOW)
    forgotten: list[str] = []
    return PodEventHandler(engine, forget=forgotten.append, clock=lambda: NOW), engine, forgotten


def test_the_service_ends_in_the_same_state_with_the_filter_as_without() -> None:
    for seed in range(5):
        events = lives(seed, 60)
        whole, whole_engine, whole_forgotten = handler_and_log()
        filtered, filtered_engine, filtered_forgotten = handler_and_log()
        watch_filter = filtered.watch_filter
        most = 0
        seen: set[str] = set()
        resized: set[float] = set()
        for event in events:
            whole(event["type"], event["object"])
            raw = line(event)
            if watch_filter(raw):
                decoded = orjson.loads(raw)
                filtered(decoded["type"], decoded["object"])
            assert watch_filter.version == event["object"]["metadata"]["resourceVersion"]
            assert filtered_engine.reservations == whole_engine.reservations, seed
            assert filtered_engine.herd() == whole_engine.herd(), seed
            most = max(most, len(whole_engine.reservations))
            sources = {r.source for r in whole_engine.reservations.values()}
            seen |= sources
            resized |= {r.cores for r in whole_engine.reservations.values()} - {0.25}
        assert set(filtered_forgotten) == set(whole_forgotten), seed
        assert most > 0, seed  # the stream does reach the herd guard
        assert seen == {"watch", "nominated"} and resized, (seed, seen, resized)
        # (Nominations and resizes are kept: fewer lines to drop than status reports alone.)
        assert watch_filter.dropped > len(events) // 5, (seed, watch_filter.dropped, len(events))


def test_a_relist_forgets_the_pods_it_lacks() -> None:
    handler, _, _ = handler_and_log()
    for uid in ("a", "b"):
        handler("ADDED", pod(uid, 1, "node-1", at=stamp(NOW - 5_000)))
    update = line({"type": "MODIFIED", "object": pod("b", 2, "node-1", at=stamp(NOW - 5_000))})
    assert not handler.watch_filter(update)
    handler.relisted(["a"], NOW)
    assert len(handler.watch_filter) == 1
    assert handler.watch_filter(update)  # b is not known any more: its next line is decoded


def test_lines_it_cannot_read_are_kept() -> None:
    watch_filter = PodWatchFilter()
    watch_filter.settle("u1")
    assert watch_filter(bytearray(b'{"type":"ERROR","object":{"kind":"Status","code":410}}'))
    assert watch_filter(
        bytearray(b'{"type":"MODIFIED","object":{"spec":{"nodeName":"n"}}}')
    )  # no uid
    assert watch_filter(bytearray(b"not json"))
    assert watch_filter.dropped == 0


def test_a_pod_that_stopped_credits_its_node_what_the_metric_still_shows() -> None:
    """A measured pod (1 core of its own) deleted from node-1: the watch's DELETED event
    credits node-1 until the metric stops showing it; one only being deleted (running out
    its grace period) is not credited yet."""
    handler, engine, _ = handler_and_log()
    engine.set_node_cores({"node-1": 4.0})
    engine.install_usage(UsageTable(pods={("shop", "web-1"): 1.0}, fetched_at=NOW), NOW)
    meta = {"uid": "u-web-1", "name": "web-1", "namespace": "shop"}
    pod: dict[str, Any] = {
        "metadata": meta,
        "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    terminating = {
        **pod,
        "metadata": {**meta, "deletionTimestamp": "2027-01-15T08:00:00Z"},
    }
    handler("MODIFIED", terminating)
    assert engine.herd() == {}
    handler("DELETED", terminating)
    assert engine.herd() == {"node-1": pytest.approx(-0.25)}
