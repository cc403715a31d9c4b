"""Bind through extender.cluster.client.KubeClient against the loopback API server
(tests/harness/kubeapi.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from extender.cluster.binder import Binder
from extender.cluster.client import KubeClient
from extender.decisions.engine import Engine
from extender.decisions.wire import BindingArgs, parse_extender_args
from extender.policy.settings import Settings
from tests.harness.fixtures import NOW, fixture_json, make_settings, make_snapshot
from tests.harness.kubeapi import FakeKubeAPI, client_for

UID = "9e764942-ad6e-420d-b0b4-8a8d15daa8fb"  # the captured pod's UID


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        server.add_pod("decice", "with-requests", UID, cpu_request="500m")
        server.add_pod("decice", "other", "uid-other", scheduler_name="default-scheduler")
        yield server


def setup(api: FakeKubeAPI, **policy: Any) -> tuple[Settings, Engine, Binder]:
    settings = make_settings(**policy)
    snap = make_snapshot({"cpu": {"node-1": 0.2, "node-2": 0.95, "node-4": 0.3}})
    engine = Engine(settings, snap, NOW)
    kube = KubeClient(client_for(api), timeout=2.0, retries=1, backoff=0.01)
    return settings, engine, Binder(settings, engine, kube, clock=lambda: NOW)


def filter_pod(engine: Engine, scheduler: str = "decice_sched") -> None:
    data = fixture_json("filter-nodecache.json")
    data["Pod"]["spec"]["schedulerName"] = scheduler
    data["NodeNames"] = ["node-1", "node-2", "node-4"]
    engine.filter(parse_extender_args(orjson.dumps(data)), NOW)


def args(node: str = "node-4", name: str = "with-requests", uid: str = UID) -> BindingArgs:
    return BindingArgs(name, "decice", uid, node)


async def test_bind_creates_the_binding_with_uid_precondition(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    assert await binder.bind(args()) == ""
    assert api.pod("decice", "with-requests")["spec"]["nodeName"] == "node-4"  # type: ignore[index]
    sent = api.requests_to("POST", "/api/v1/namespaces/decice/pods/with-requests/binding")
    assert sent[0].body["metadata"]["uid"] == UID
    assert sent[0].body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-4"}
    # Herd guard: the pod's 500m request now counts on node-4 (4 cores default -> +0.125).
    assert engine.reservations[UID].cores == 0.5
    assert engine.table(NOW).evals["node-4"].values[0] == pytest.approx(0.425)


async def test_retried_bind_is_success_and_binds_once(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    assert await binder.bind(args()) == ""
    assert await binder.bind(args()) == ""  # the scheduler retried
    assert api.bind_count("decice", "with-requests") == 1
    assert "already bound to node 'node-4'" in await binder.bind(args("node-1"))


async def test_restarted_extender_recognises_a_same_node_retry(api: FakeKubeAPI) -> None:
    _, _, binder = setup(api)
    assert await binder.bind(args()) == ""  # no filter memo: the pod is read from the API
    _, _, fresh = setup(api)  # a restart forgets everything
    assert await fresh.bind(args()) == ""
    assert "already bound to node 'node-4'" in await fresh.bind(args("node-1"))
    assert api.bind_count("decice", "with-requests") == 1


async def test_concurrent_binds_for_one_uid_make_one_call(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    api.delay_next(0.3)
    results = await asyncio.gather(*(binder.bind(args()) for _ in range(5)))
    assert results == [""] * 5
    assert api.bind_count("decice", "with-requests") == 1
    assert len(api.requests_to("POST", "/api/v1/namespaces/decice/pods/with-requests/binding")) == 1


async def test_node_rejected_by_our_filter_is_refused(
    api: FakeKubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    _, engine, binder = setup(api, metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    filter_pod(engine)
    with caplog.at_level(logging.WARNING, "decice.bind"):
        error = await binder.bind(args("node-2"))
    assert "node 'node-2' was rejected by this extender's filter" in error
    assert "bind refused" in caplog.text and "node-2" in caplog.text
    assert api.bind_count("decice", "with-requests") == 0


async def test_foreign_pod_refused_or_bound_by_policy(api: FakeKubeAPI) -> None:
    _, _, binder = setup(api)
    error = await binder.bind(args("node-1", name="other", uid="uid-other"))
    assert "schedulerName 'default-scheduler'" in error and "bind.foreignPods: bind" in error
    assert api.bind_count("decice", "other") == 0
    _, engine2, permissive = setup(api, bind={"foreignPods": "bind"})
    assert await permissive.bind(args("node-1", name="other", uid="uid-other")) == ""
    assert api.bind_count("decice", "other") == 1
    assert "uid-other" not in engine2.reservations  # herd guard counts only our pods


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (403, "Kubernetes API 403 Forbidden"),
        (401, "Kubernetes API 401 Unauthorized"),
    ],
)
async def test_api_errors_come_back_as_error_strings(
    api: FakeKubeAPI, fault: int, expected: str
) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    api.fail_next(fault)
    error = await binder.bind(args())
    assert error.startswith("decice: bind of decice/with-requests to node-4 failed: ")
    assert expected in error


async def test_missing_pod_and_uid_mismatch(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    assert "404" in await binder.bind(args(name="ghost", uid="u-ghost"))
    mismatch = await binder.bind(args(uid="00000000-0000-4000-8000-000000000000"))
    assert "it was deleted and re-created" in mismatch
    filter_pod(engine)  # with a memo the API's own 409 precondition answers
    api.add_pod("decice", "with-requests", "new-uid")
    error = await binder.bind(args())
    assert "409" in error and "Precondition failed" in error
    assert api.bind_count("decice", "with-requests") == 0


async def test_server_errors_are_retried_then_reported(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    api.fail_next(500, times=1)
    assert await binder.bind(args()) == ""
    assert api.bind_count("decice", "with-requests") == 1


async def test_unreachable_api_and_disabled_bind() -> None:
    settings = make_settings()
    engine = Engine(settings, make_snapshot({"cpu": {}}), NOW)
    server = FakeKubeAPI().start()
    client = client_for(server)
    server.stop()  # connection refused from now on
    binder = Binder(settings, engine, KubeClient(client, timeout=0.5, retries=1, backoff=0.01))
    assert "failed" in await binder.bind(args())
    none = Binder(settings, engine, None)
    assert "no Kubernetes client" in await none.bind(args())
    off = make_settings(bind={"enabled": False})
    disabled = Binder(off, Engine(off, make_snapshot({"cpu": {}}), NOW), None)
    assert "remove bindVerb" in await disabled.bind(args())


async def test_node_outside_the_filtered_candidates_is_refused(api: FakeKubeAPI) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)  # asked about node-1, node-2, node-4
    error = await binder.bind(args("node-404"))
    assert "node 'node-404' was not among the nodes sent to this extender's filter" in error
    assert api.bind_count("decice", "with-requests") == 0


async def test_the_reservation_counts_while_the_binding_is_in_flight(api: FakeKubeAPI) -> None:
    """kube-scheduler scores its next pods while a Binding is on its way: they must see
    this pod on its node already, not only once the API answered."""
    _, engine, binder = setup(api)
    filter_pod(engine)
    api.delay_next(0.5)
    bind = asyncio.create_task(binder.bind(args()))
    while not api.requests_to("POST", "/api/v1/namespaces/decice/pods/with-requests/binding"):
        await asyncio.sleep(0.01)  # the call reached the server, whose answer is stalled
    assert binder.binding(UID) and engine.reservations[UID].node == "node-4"
    assert engine.table(NOW).evals["node-4"].values[0] == pytest.approx(0.425)
    assert await bind == ""
    assert engine.reservations[UID].source == "bind"


@pytest.mark.parametrize(
    ("fault", "kept"),
    [
        (404, False),  # the pod is gone: surely not bound
        (403, False),
        (409, False),  # another UID, or bound elsewhere
        (500, True),  # may have been bound before the server failed: kept
        (429, True),
    ],
)
async def test_a_failed_binding_releases_the_reservation_only_when_surely_unbound(
    api: FakeKubeAPI, fault: int, kept: bool
) -> None:
    _, engine, binder = setup(api)
    filter_pod(engine)
    api.fail_next(fault, times=2)  # the client's one retry of a 429 or 5xx fails too
    assert "failed" in await binder.bind(args())
    assert (UID in engine.reservations) is kept
    expected = 0.425 if kept else 0.3
    assert engine.table(NOW).evals["node-4"].values[0] == pytest.approx(expected)


async def test_a_bind_timed_out_keeps_the_reservation(api: FakeKubeAPI) -> None:
    """The answer comes too late (the server bound the pod): the reservation stays."""
    settings = make_settings()
    engine = Engine(settings, make_snapshot({"cpu": {"node-4": 0.3}}), NOW)
    filter_pod(engine)
    kube = KubeClient(client_for(api), timeout=0.2, retries=0)
    binder = Binder(settings, engine, kube, clock=lambda: NOW)
    api.delay_next(1.0, after=True)
    assert "failed" in await binder.bind(args())
    assert api.bind_count("decice", "with-requests") == 1 and UID in engine.reservations
    await kube.close()
