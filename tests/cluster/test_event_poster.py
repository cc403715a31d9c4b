"""extender.cluster.event_poster: Events on placed pods, best-effort, bounded, never
retried; and the Event itself through extender.cluster.client.KubeClient against the
loopback API server."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.cluster.client import KubeClient
from extender.cluster.client.errors import KubeError
from extender.cluster.event_poster import EventPoster, placement_event
from extender.decisions.engine import Engine
from extender.decisions.model import PodEvent
from extender.decisions.wire import parse_extender_args
from extender.service.compose import build_service
from tests.harness.fixtures import APISERVER, NOW, make_settings, make_snapshot
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.kubecalls import KubeCalls
from tests.harness.loopback import wait_until, wait_until_async

CPU = {"node-1": 0.4, "node-2": 0.95, "node-3": 0.1}
NS, UID = "decice", "9e764942-ad6e-420d-b0b4-8a8d15daa8fb"


def policy(**explain: Any) -> dict[str, Any]:
    return {
        "static": {"nodes": {n: {"cpu": v} for n, v in CPU.items()}},
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "explain": {"eventsPerSecond": 1000, **explain},
    }


def filter_body(name: str = "with-requests", uid: str = UID) -> bytes:
    pod = {
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "spec": {"schedulerName": "decice_sched"},
    }
    return orjson.dumps({"Pod": pod, "NodeNames": list(CPU)})


class Sink(KubeCalls):
    def __init__(self, fail: bool = False) -> None:
        self.events: list[PodEvent] = []
        self.fail = fail

    async def create_event(self, event: PodEvent) -> None:
        if self.fail:
            raise KubeError("the API said no", status=403, reason="Forbidden")
        self.events.append(event)


def decided(engine: Engine, uid: str = UID, node: str = "node-3") -> None:
    engine.filter(parse_extender_args(filter_body(uid=uid, name=f"p-{uid[:4]}")), NOW)
    engine.pods.placed(uid, node)


def test_the_note_reads_at_a_glance() -> None:
    settings = make_settings(**policy())
    engine = Engine(settings, make_snapshot({"cpu": CPU}), NOW)
    decided(engine)
    memo = engine.pods.get(UID)
    assert memo is not None
    event = placement_event(memo, NOW + 1, "extender-0")
    assert (event.reason, event.action, event.type) == ("Placed", "Binding", "Normal")
    assert event.note == (
        "placed on node-3: score 9/10 (cpu 0.10); 3 candidates, 1 filtered (cpu above 0.9); "
        "next best node-1 score 6"
    )


async def test_posted_once_dropped_when_full_failed_never_retried() -> None:
    settings = make_settings(**policy(eventQueue=2))
    engine = Engine(settings, make_snapshot({"cpu": CPU}), NOW)
    for i in range(4):
        decided(engine, uid=f"{i}000-u")
    sink, outcomes = Sink(), Counter[str]()
    poster = EventPoster(settings, engine.pods, sink, lambda o: outcomes.update([o]), lambda: NOW)
    for i in range(4):
        poster.placed(f"{i}000-u")  # the queue holds 2: two are dropped at once
    assert outcomes == {"dropped": 2}
    task = asyncio.create_task(poster.run())
    await wait_until_async(lambda: len(sink.events) == 2, 30, "two Events posted")
    assert [e.uid for e in sink.events] == ["0000-u", "1000-u"]
    sink.fail = True
    poster.placed("2000-u")
    await wait_until_async(lambda: outcomes["failed"] == 1, 30, "the failed post counted")
    poster.placed("unknown-uid")  # forgotten meanwhile: dropped, not posted
    await wait_until_async(lambda: outcomes["dropped"] == 3, 30, "the unknown pod dropped")
    task.cancel()
    assert outcomes == {"dropped": 3, "posted": 2, "failed": 1}
    assert len(sink.events) == 2  # the failed one was not retried


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.add_pod(NS, "with-requests", UID)
        yield server


async def test_create_event_follows_the_captured_answer(api: FakeKubeAPI) -> None:
    captured = json.loads((APISERVER / "event-create.json").read_text())["response"]
    kube = KubeClient(client_for(api).configuration, timeout=2, retries=1)
    await kube.create_event(
        PodEvent(NS, "w3", "e1a8", "Scored", "Scoring", "node-3: score 9", 1795872383.0, "x")
    )
    await kube.close()
    (stored,) = api.events
    assert set(captured) <= set(stored) | {
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
    }
    assert stored["metadata"]["generateName"] == "w3-"
    assert stored["metadata"]["name"].startswith("w3-")
    assert stored["reportingController"] == captured["reportingController"] == "decice.io/extender"
    assert stored["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": NS,
        "name": "w3",
        "uid": "e1a8",
    }
    assert stored["eventTime"] == "2026-11-28T13:26:23.000000Z"  # MicroTime, as captured
    assert len(stored["eventTime"]) == len(captured["eventTime"])
    (request,) = api.requests_to("POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    assert request.body["type"] == "Normal"


def test_bad_events_answer_like_the_real_server(api: FakeKubeAPI) -> None:
    captured = json.loads((APISERVER / "event-bad.json").read_text())["response"]
    body = {"metadata": {"generateName": "x."}, "regarding": {"kind": "Pod", "name": "x"}}
    request = urllib.request.Request(
        f"{api.url}/apis/events.k8s.io/v1/namespaces/{NS}/events",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    answer = json.loads(caught.value.read())
    assert caught.value.code == captured["code"] == 422
    assert answer["reason"] == captured["reason"]
    fields = [c["field"] for c in answer["details"]["causes"]]
    assert fields == [c["field"] for c in captured["details"]["causes"]]


def filter_and_bind(client: TestClient) -> None:
    """The scheduler's filter call for the pod, then its bind to node-3."""
    headers = {"Content-Type": "application/json"}
    client.post("/filter", content=filter_body(), headers=headers)
    bind = {"PodName": "with-requests", "PodNamespace": NS, "PodUID": UID, "Node": "node-3"}
    answer = client.post("/bind", content=orjson.dumps(bind), headers=headers)
    assert answer.json() == {"Error": ""}


def test_a_pod_we_bind_gets_its_event(api: FakeKubeAPI) -> None:
    settings = make_settings(**policy())
    service = build_service(settings, kube=KubeClient(client_for(api), timeout=2, retries=1))
    with TestClient(service.app) as client:
        filter_and_bind(client)
        posted = 'decice_events_total{outcome="posted"} 1.0'
        wait_until(lambda: posted in client.get("/metrics").text, 30, "the Event was posted")
        (event,) = api.events
        assert event["note"].startswith("placed on node-3: score 9/10 (cpu 0.10)")
        assert event["regarding"]["uid"] == UID and event["reason"] == "Placed"


def test_events_can_be_switched_off(api: FakeKubeAPI) -> None:
    off = build_service(
        make_settings(**policy(events=False)),
        kube=KubeClient(client_for(api), timeout=2, retries=1),
    )
    with TestClient(off.app) as client:
        filter_and_bind(client)
        assert "decice_events_total{" not in client.get("/metrics").text
    assert api.events == []


async def test_a_hostile_pod_name_is_never_posted() -> None:
    """The bind guard refuses such names before any bind; the poster checks again."""
    settings = make_settings(**policy())
    engine = Engine(settings, make_snapshot({"cpu": CPU}), NOW)
    pod = {"metadata": {"name": "x\nFAKE", "namespace": NS, "uid": "u-bad"}}
    body = orjson.dumps(
        {"Pod": pod | {"spec": {"schedulerName": "decice_sched"}}, "NodeNames": ["node-3"]}
    )
    engine.filter(parse_extender_args(body), NOW)
    engine.pods.placed("u-bad", "node-3")
    sink, outcomes = Sink(), Counter[str]()
    poster = EventPoster(settings, engine.pods, sink, lambda o: outcomes.update([o]), lambda: NOW)
    poster.placed("u-bad")
    task = asyncio.create_task(poster.run())
    await wait_until_async(lambda: outcomes["dropped"] == 1, 30, "the hostile pod dropped")
    task.cancel()
    assert sink.events == []
