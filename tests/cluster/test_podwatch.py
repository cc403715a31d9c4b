"""End to end against the loopback API server: the pod and node watches feed the herd
guard and the node cache, turned-away pods are requeued by a UID-guarded patch, and a
watch that breaks, expires or is refused heals by itself while filter keeps answering."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.cluster.client import KubeClient
from extender.cluster.requeue import ANNOTATION, Requeuer
from extender.decisions.turnedaway import TurnedAway
from extender.metrics.providers import StaticProvider
from extender.service.compose import Service, build_service
from tests.harness.fixtures import make_settings
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.loopback import wait_until, wait_until_async

NS = "decice"
JSON = {"Content-Type": "application/json"}


def policy(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "prometheus": {"interval": 3600},  # refreshes only when a test asks
        "herdGuard": {"settle": 30},
        "bind": {"enabled": False},
        "explain": {"events": False},
        "kubernetes": {"watchTimeout": 5},
    }
    raw.update(overrides)
    return raw


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for name, ip in (("node-a", "10.0.0.1"), ("node-b", "10.0.0.2")):
            server.add_node(name, ip, cpu="4")
        yield server


class Stack:
    def __init__(self, api: FakeKubeAPI, values: dict[str, dict[str, float]], **kw: Any) -> None:
        self.values = values
        settings = make_settings(**policy(**kw))
        kube = KubeClient(client_for(api), timeout=2, retries=0)
        self.service: Service = build_service(
            settings, provider=StaticProvider(self.values), kube=kube
        )
        self.client = TestClient(self.service.app)

    def __enter__(self) -> Stack:
        self.client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)

    def refresh(self) -> None:
        self.client.portal.call(self.service.refresher.refresh_once)  # type: ignore[union-attr]

    def watching(self, resource: str) -> bool:
        return any(
            i.status.resource == resource and i.status.watching for i in self.service.informers
        )

    def filter(self, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
        body = {"Pod": pod, "NodeNames": names, "Nodes": None}
        answer = self.client.post("/filter", content=orjson.dumps(body), headers=JSON)
        assert answer.status_code == 200
        result: dict[str, Any] = answer.json()
        return result

    def scores(self, names: list[str], pod: dict[str, Any]) -> dict[str, int]:
        body = {"Pod": pod, "NodeNames": names, "Nodes": None}
        answer = self.client.post("/prioritize", content=orjson.dumps(body), headers=JSON)
        return {h["Host"]: h["Score"] for h in answer.json()}

    def readyz(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.client.get("/readyz").json()
        return doc

    def metrics(self) -> str:
        return self.client.get("/metrics").text


def up(stack: Stack, api: FakeKubeAPI) -> None:
    wait_until(lambda: stack.watching("pods") and stack.watching("nodes"), 30, "both watches up")
    wait_until(lambda: api.open_watches("pods") == 1, 30, "the pod watch is open")


def test_a_pod_the_default_binder_placed_counts_until_deleted(api: FakeKubeAPI) -> None:
    pod = api.add_pod(NS, "w1", "uid-w1", cpu_request="2")
    cool = {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}}
    with Stack(api, cool) as stack:
        up(stack, api)
        before = stack.scores(["node-a", "node-b"], pod)
        assert before["node-a"] > before["node-b"]
        stack.filter(pod, ["node-a", "node-b"])
        api.assign(NS, "w1", "node-a")  # the scheduler's own binder: no /bind reached us
        engine = stack.service.engine
        wait_until(lambda: "uid-w1" in engine.reservations, 30, "the watch reserved w1")
        reservation = engine.reservations["uid-w1"]
        assert (reservation.node, reservation.cores, reservation.source) == ("node-a", 2, "watch")
        after = stack.scores(["node-a", "node-b"], pod)
        assert after["node-a"] < after["node-b"]  # 2 of 4 cores: node-a looks busier now
        memo = engine.pods.get("uid-w1")
        assert memo is not None and memo.node == "node-a"  # /explain shows where it went
        assert 'decice_herd_reservations{source="watch"} 1.0' in stack.metrics()
        api.delete_pod(NS, "w1")
        wait_until(lambda: not engine.reservations, 30, "the deletion released w1")
        assert stack.scores(["node-a", "node-b"], pod) == before


def test_a_restarted_service_counts_the_pods_placed_in_its_settle_window(
    api: FakeKubeAPI,
) -> None:
    # A burst placed these just before the service (re)started: the watch's first list
    # reads every pod holding a node, and the recent assignments count again.
    for i, node in enumerate(("node-a", "node-a", "node-b")):
        api.add_pod(NS, f"w{i}", f"uid-w{i}", cpu_request="1")
        api.assign(NS, f"w{i}", node)
    api.add_pod(NS, "old", "uid-old", node_name="node-b", phase="Running", created=1.0e9)
    api.add_pod(NS, "pending", "uid-pending")
    with Stack(api, {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}}) as stack:
        up(stack, api)
        engine = stack.service.engine
        reserved = {uid: (r.node, r.source) for uid, r in engine.reservations.items()}
        assert reserved == {
            "uid-w0": ("node-a", "watch"),
            "uid-w1": ("node-a", "watch"),
            "uid-w2": ("node-b", "watch"),
        }  # not the pod placed long ago (its load is in the metrics), nor the pending one
        [first] = [r for r in api.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
        assert first.query["fieldSelector"] == [
            "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
        ]


def test_the_node_watch_keeps_the_inventory(api: FakeKubeAPI) -> None:
    with Stack(api, {"node-a": {"cpu": 0.2}}) as stack:
        up(stack, api)
        nodes = stack.service.nodes
        assert nodes.inventory().by_ip == {"10.0.0.1": "node-a", "10.0.0.2": "node-b"}
        api.add_node("node-c", "10.0.0.3", cpu="16")
        api.remove_node("node-a")
        wait_until(
            lambda: nodes.inventory().by_ip == {"10.0.0.2": "node-b", "10.0.0.3": "node-c"},
            30,
            "the node watch applied the add and the removal",
        )
        assert nodes.inventory().cpu_cores["node-c"] == 16
        # Never listed again: one list at start, then the watch.
        assert len(api.requests_to("GET", "/api/v1/nodes")) >= 1
        lists = [r for r in api.requests_to("GET", "/api/v1/nodes") if "watch" not in r.query]
        assert len(lists) == 1


def test_a_turned_away_pod_is_requeued_once_metrics_recover(api: FakeKubeAPI) -> None:
    hot = {"node-a": {"cpu": 0.95}, "node-b": {"cpu": 0.97}}
    # Created now: herdGuard.waitForRoom counts from a pod's creation, and the fake's
    # default is a time long past, when every wait would be over at once.
    waiting = api.add_pod(NS, "w2", "uid-w2", created=time.time())
    bound = api.add_pod(NS, "w3", "uid-w3", created=time.time())
    reborn = api.add_pod(NS, "w4", "uid-w4", created=time.time())
    with Stack(api, hot) as stack:
        up(stack, api)
        for pod in (waiting, bound, reborn):
            answer = stack.filter(pod, ["node-a", "node-b"])
            assert set(answer["FailedAndUnresolvableNodes"]) == {"node-a", "node-b"}
        turned_away = stack.service.engine.turned_away
        assert turned_away is not None and len(turned_away) == 3
        api.assign(NS, "w3", "node-b")  # placed anyway (another scheduler): never patched
        wait_until(lambda: "uid-w3" not in turned_away, 30, "the watch saw w3 bound")
        api.delete_pod(NS, "w4")
        api.add_pod(NS, "w4", "uid-w4-new")  # same name, another pod: must not be touched
        stack.refresh()
        assert api.requests_to("PATCH", f"/api/v1/namespaces/{NS}/pods/w2") == []  # still hot
        stack.values["node-a"]["cpu"] = 0.4
        stack.refresh()
        wait_until(
            lambda: (api.pod(NS, "w2") or {}).get("metadata", {}).get("annotations"),
            30,
            "w2 was patched",
        )
        patch = api.requests_to("PATCH", f"/api/v1/namespaces/{NS}/pods/w2")[0]
        assert patch.headers["content-type"] == "application/merge-patch+json"
        assert patch.body["metadata"]["uid"] == "uid-w2"
        assert ANNOTATION in patch.body["metadata"]["annotations"]
        assert api.requests_to("PATCH", f"/api/v1/namespaces/{NS}/pods/w3") == []
        text = stack.metrics()
        assert 'decice_requeue_patches_total{outcome="patched"} 1.0' in text
        new = api.pod(NS, "w4") or {}
        assert ANNOTATION not in (new.get("metadata", {}).get("annotations") or {})


async def test_a_patch_for_a_recreated_pod_is_refused_by_its_uid(api: FakeKubeAPI) -> None:
    """The UID precondition, through the real client and the API server's 422: a pod
    deleted and re-created under the same name before its patch is never touched."""
    api.add_pod(NS, "w5", "uid-w5")
    outcomes: list[str] = []
    kube = KubeClient(client_for(api), timeout=2, retries=0)
    requeuer = Requeuer(make_settings(), kube, outcomes.append)
    api.delete_pod(NS, "w5")
    api.add_pod(NS, "w5", "uid-w5-new")
    away = TurnedAway("uid-w5", NS, "w5", ("node-a",), 0.0)
    gone = TurnedAway("uid-w9", NS, "w9", ("node-a",), 0.0)
    task = asyncio.create_task(requeuer.run())
    try:
        requeuer.recovered([away, gone], 0.0)
        await wait_until_async(lambda: len(outcomes) == 2, 30, "both patches answered")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()
    assert outcomes == ["recreated", "gone"]
    new = api.pod(NS, "w5") or {}
    assert ANNOTATION not in (new.get("metadata", {}).get("annotations") or {})


def test_watches_heal_after_a_cut_an_expiry_and_a_refusal(api: FakeKubeAPI) -> None:
    pod = api.add_pod(NS, "w6", "uid-w6")
    with Stack(api, {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}}) as stack:
        up(stack, api)
        informers = {i.status.resource: i for i in stack.service.informers}
        pods = informers["pods"].status
        api.fail_next(403, times=1, watch=True)  # the next watch request is refused
        api.break_watches()
        wait_until(lambda: pods.restarts.get("error", 0) >= 1, 30, "the cut was noticed")
        wait_until(lambda: stack.readyz()["watches"]["pods"]["error"] or pods.watching, 30, "")
        answer = stack.filter(pod, ["node-a", "node-b"])  # still answers
        assert answer["NodeNames"] == ["node-a", "node-b"]
        api.expire_history(including_now=True)
        api.break_watches()
        wait_until(lambda: pods.restarts.get("expired", 0) >= 1, 60, "the 410 was handled")
        up(stack, api)
        api.assign(NS, "w6", "node-b")
        wait_until(
            lambda: "uid-w6" in stack.service.engine.reservations,
            60,
            "events flow again after the restarts",
        )
        detail = stack.readyz()["watches"]["pods"]
        assert detail["watching"] and detail["error"] is None
        assert 'decice_watch_restarts_total{reason="expired",resource="pods"}' in stack.metrics()


def test_a_pod_deleted_while_the_watch_was_down_is_released_by_the_relist(
    api: FakeKubeAPI,
) -> None:
    # Placed by another binder, counted through the watch.
    for name, node in (("kept", "node-a"), ("gone", "node-b")):
        api.add_pod(NS, name, f"uid-{name}", cpu_request="2")
        api.assign(NS, name, node)
    cool = {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}}
    probe = api.add_pod(NS, "probe", "uid-probe")
    with Stack(api, cool) as stack:
        up(stack, api)
        engine = stack.service.engine
        wait_until(lambda: {"uid-kept", "uid-gone"} <= set(engine.reservations), 30, "both counted")
        busy = stack.scores(["node-a", "node-b"], probe)
        pods = {i.status.resource: i for i in stack.service.informers}["pods"].status
        # The API server goes away; meanwhile "gone" is deleted, and its DELETED event is
        # compacted away before the server answers again (a restarted API server's watch
        # cache starts at the current version): the watch's resume gets 410 Expired.
        api.go_away()
        wait_until(lambda: not stack.watching("pods"), 30, "the watch saw the server go")
        api.delete_pod(NS, "gone")
        api.expire_history()
        api.come_back()
        wait_until(lambda: pods.restarts.get("expired", 0) >= 1, 60, "the 410 was handled")
        wait_until(lambda: "uid-gone" not in engine.reservations, 30, "the relist released it")
        assert set(engine.reservations) == {"uid-kept"}
        after = stack.scores(["node-a", "node-b"], probe)
        assert after["node-b"] > busy["node-b"] and after["node-a"] == busy["node-a"]


def test_a_node_removed_takes_its_reservations_and_rows_and_a_new_one_is_sized_at_once(
    api: FakeKubeAPI,
) -> None:
    api.add_pod(NS, "on-b", "uid-on-b", cpu_request="2")
    api.assign(NS, "on-b", "node-b")
    api.add_pod(NS, "on-c", "uid-on-c", cpu_request="2")
    api.assign(NS, "on-c", "node-c")  # a node the service has not heard of yet
    values = {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}, "node-c": {"cpu": 0.3}}
    with Stack(api, values) as stack:
        up(stack, api)
        engine = stack.service.engine
        wait_until(lambda: len(engine.reservations) == 2, 30, "both counted")
        # A node the node watch has not told of has no size: its pod counts nothing there
        # yet (no veto rests on a guessed size; before, defaultNodeCores: 2 / 4).
        assert engine.herd().get("node-c", 0.0) == 0.0
        assert engine.table(0.0).passes("node-c")
        # The autoscaler adds node-c (16 cores) and removes node-b; no refresh runs.
        api.add_node("node-c", "10.0.0.3", cpu="16")
        api.remove_node("node-b")
        wait_until(lambda: engine.herd().get("node-c") == 2 / 16, 30, "node-c sized at once")
        wait_until(lambda: "uid-on-b" not in engine.reservations, 30, "node-b's pod dropped")
        assert "node-b" not in engine.herd()
        assert "node-b" not in engine.table(0.0).evals
        assert 'decice_node_score{node="node-b"' not in stack.metrics()


def test_status_updates_of_placed_and_pending_pods_are_dropped_undecoded(
    api: FakeKubeAPI,
) -> None:
    # The filter (cluster.watch_filter) on the real stream: a running pod's and a pending pod's
    # updates never reach the handler; a new assignment and a deletion still do.
    api.add_pod(NS, "old", "uid-old", node_name="node-b", phase="Running", created=1.0e9)
    api.add_pod(NS, "pending", "uid-pending")
    with Stack(api, {"node-a": {"cpu": 0.2}, "node-b": {"cpu": 0.3}}) as stack:
        up(stack, api)
        engine = stack.service.engine
        [watch] = [i for i in stack.service.informers if i.status.resource == "pods"]
        for _ in range(3):
            api.set_phase(NS, "old", "Running")  # a kubelet's status report
            api.set_phase(NS, "pending", "Pending")
        wait_until(lambda: stack.readyz()["watches"]["pods"]["dropped"] == 6, 30, "6 dropped")
        assert watch.status.events == 0
        api.assign(NS, "pending", "node-a")
        wait_until(lambda: "uid-pending" in engine.reservations, 30, "the assignment counted")
        api.set_phase(NS, "pending", "Running")
        api.delete_pod(NS, "pending")
        wait_until(lambda: not engine.reservations, 30, "the deletion released it")
        # The assignment, the deletion mark and the DELETED event: the Running report of
        # the pod it already read as assigned was dropped.
        assert watch.status.events == 3
        assert stack.readyz()["watches"]["pods"]["dropped"] == 7


def test_an_api_server_arriving_late_vetoes_no_node_on_a_size_it_does_not_know(
    api: FakeKubeAPI,
) -> None:
    """The service starts before the API server answers: its node cache is empty, /readyz
    says so, and no node is turned away for want of room it cannot size (the scheduler's
    own resource checks stand). Within a second of the API server answering, the cache
    is synced and node-a (4 cores) is too small for a 3.5-core pod again."""
    api.add_node("node-c", "10.0.0.3", cpu="16")
    pod = {
        "metadata": {"name": "big", "namespace": NS, "uid": "uid-big"},
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3500m"}}}],
        },
    }
    api.go_away()
    values = {"node-a": {"cpu": 0.3}, "node-c": {"cpu": 0.3}}
    with Stack(api, values) as stack:
        ready = stack.readyz()
        assert ready["nodeCacheSynced"] is False and ready["watches"]["nodes"]["synced"] is False
        assert stack.filter(pod, ["node-a", "node-c"])["NodeNames"] == ["node-a", "node-c"]
        api.come_back()
        began = time.monotonic()
        wait_until(lambda: stack.readyz()["nodeCacheSynced"], 5, "the node cache synced")
        print(f"\nnode cache synced {time.monotonic() - began:.2f} s after the API server answered")
        assert stack.filter(pod, ["node-a", "node-c"])["NodeNames"] == ["node-c"]
        assert stack.readyz()["watches"]["nodes"]["synced"] is True
