"""Kubernetes API faults on bind, through HTTP /bind, Binder and KubeClient against
FakeKubeAPI: never a 5xx from us, never a crash, never a pod bound twice."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from extender.decisions.wire import parse_binding_args
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import build_service
from tests.harness.kubeapi import FakeKubeAPI
from tests.harness.loopback import free_port, wait_until_async
from tests.harness.stack import (
    NS,
    binding_args,
    extender_args,
    kube_client,
    policy,
    post,
)

UID = "0b0c4a8e-8f43-4a4e-9d35-1f0f2e6d0001"
OTHER_UID = "0b0c4a8e-8f43-4a4e-9d35-1f0f2e6d0002"
BINDING = f"/api/v1/namespaces/{NS}/pods/p1/binding"
GET_POD = f"/api/v1/namespaces/{NS}/pods/p1"


def bind(client: TestClient, node: str = "node-1", uid: str = UID, *, filtered: bool) -> str:
    """Bind p1 through HTTP; with `filtered`, the scheduler's filter call comes first
    (the bind then needs no GET of the pod). Asserts 200 and returns the Error string."""
    if filtered:
        status, _ = post(client, "filter", extender_args(uid, "p1", ["node-1", "node-2"]))
        assert status == 200
    status, answer = post(client, "bind", binding_args(uid, "p1", node))
    assert status == 200, answer
    assert set(answer) == {"Error"}
    error: str = answer["Error"]
    return error


@pytest.mark.parametrize("filtered", [True, False])
def test_bind_succeeds_once_and_a_retry_makes_no_second_call(
    kube_api: FakeKubeAPI, client: TestClient, filtered: bool
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    assert bind(client, filtered=filtered) == ""
    assert bind(client, filtered=filtered) == ""  # the scheduler's retry
    assert kube_api.bind_count(NS, "p1") == 1
    assert len(kube_api.requests_to("POST", BINDING)) == 1
    assert kube_api.pod(NS, "p1")["spec"]["nodeName"] == "node-1"  # type: ignore[index]


def test_bind_401_wrong_token(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeKubeAPI(token="kube-token-s3cret-401") as api:
        api.add_pod(NS, "p1", UID)
        stack = build_service(settings, kube=kube_client(api, settings, token="wrong-token-zz9"))
        with TestClient(stack.app) as c:
            error = bind(c, filtered=True)
        assert "401 Unauthorized" in error
        assert api.bind_count(NS, "p1") == 0
        assert len(api.requests_to("POST", BINDING)) == 1  # a 401 is not retried
    assert "wrong-token-zz9" not in caplog.text
    assert "kube-token-s3cret-401" not in caplog.text


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (403, "403 Forbidden"),
        (400, "400 BadRequest"),
        (422, "422 UnprocessableEntity"),
    ],
)
def test_bind_client_errors_are_reported_not_retried(
    kube_api: FakeKubeAPI, client: TestClient, status: int, expected: str
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.fail_next(status)
    error = bind(client, filtered=True)
    assert expected in error
    assert "p1" in error and "node-1" in error
    assert len(kube_api.requests_to("POST", BINDING)) == 1
    assert kube_api.bind_count(NS, "p1") == 0


def test_bind_403_names_the_missing_permission(kube_api: FakeKubeAPI, client: TestClient) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.fail_next(403)
    error = bind(client, filtered=True)
    assert 'cannot create resource "pods/binding"' in error


@pytest.mark.parametrize("filtered", [True, False])
def test_bind_404_pod_gone(kube_api: FakeKubeAPI, client: TestClient, filtered: bool) -> None:
    error = bind(client, filtered=filtered)
    assert "404 NotFound" in error and 'pods "p1" not found' in error
    assert kube_api.bind_count(NS, "p1") == 0


def test_bind_409_uid_mismatch_after_filter(kube_api: FakeKubeAPI, client: TestClient) -> None:
    """The pod was deleted and re-created between filter and bind: the UID precondition
    makes the API refuse, and we pass the conflict on."""
    kube_api.add_pod(NS, "p1", OTHER_UID)
    error = bind(client, filtered=True)
    assert "409 Conflict" in error and "Precondition failed" in error
    assert kube_api.bind_count(NS, "p1") == 0
    assert kube_api.pod(NS, "p1")["spec"].get("nodeName") is None  # type: ignore[index]


def test_bind_uid_mismatch_without_filter_is_refused_before_the_call(
    kube_api: FakeKubeAPI, client: TestClient
) -> None:
    kube_api.add_pod(NS, "p1", OTHER_UID)
    error = bind(client, filtered=False)
    assert "deleted and re-created" in error
    assert kube_api.requests_to("POST", BINDING) == []


@pytest.mark.parametrize("filtered", [True, False])
def test_bind_409_already_bound_same_node_is_success(
    kube_api: FakeKubeAPI, client: TestClient, filtered: bool
) -> None:
    kube_api.add_pod(NS, "p1", UID, node_name="node-1")
    assert bind(client, filtered=filtered) == ""
    assert kube_api.bind_count(NS, "p1") == 0  # the API accepted no second bind


@pytest.mark.parametrize("filtered", [True, False])
def test_bind_409_already_bound_other_node_is_an_error(
    kube_api: FakeKubeAPI, client: TestClient, filtered: bool
) -> None:
    kube_api.add_pod(NS, "p1", UID, node_name="node-2")
    error = bind(client, filtered=filtered)
    assert "already" in error and "node-2" in error
    assert kube_api.pod(NS, "p1")["spec"]["nodeName"] == "node-2"  # type: ignore[index]


@pytest.mark.parametrize("status", [429, 500, 503, 504])
def test_bind_retries_transient_errors_then_succeeds(
    kube_api: FakeKubeAPI, client: TestClient, status: int
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.fail_next(status, times=2)  # retries: 2 -> the third attempt goes through
    assert bind(client, filtered=True) == ""
    assert len(kube_api.requests_to("POST", BINDING)) == 3
    assert kube_api.bind_count(NS, "p1") == 1


@pytest.mark.parametrize("status", [429, 500])
def test_bind_retries_are_bounded(kube_api: FakeKubeAPI, client: TestClient, status: int) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.fail_next(status, times=10)
    started = time.monotonic()
    error = bind(client, filtered=True)
    assert f"{status} " in error and "gave up after 3 attempts" in error
    assert time.monotonic() - started < 5  # the scheduler's httpTimeout: the bound that matters
    assert len(kube_api.requests_to("POST", BINDING)) == 3
    assert kube_api.bind_count(NS, "p1") == 0


def test_bind_timeout_before_the_api_acts_then_retry(
    kube_api: FakeKubeAPI, client: TestClient
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.delay_next(1.5)  # > bind.timeout 0.5: the first attempt times out
    assert bind(client, filtered=True) == ""
    kube_api.release_delays()
    assert kube_api.wait_idle(5)
    assert kube_api.bind_count(NS, "p1") == 1


def test_bind_timeout_after_the_api_acted_is_not_a_double_bind(
    kube_api: FakeKubeAPI, client: TestClient
) -> None:
    """The bind took effect but its answer came too late: the retry meets 409 'already
    assigned to node-1', which is the same node, so it is a success."""
    kube_api.add_pod(NS, "p1", UID)
    kube_api.delay_next(1.5, after=True)
    assert bind(client, filtered=True) == ""
    kube_api.release_delays()
    assert kube_api.wait_idle(5)
    assert kube_api.bind_count(NS, "p1") == 1
    assert len(kube_api.requests_to("POST", BINDING)) == 2


def test_bind_timeouts_outlast_the_retries(kube_api: FakeKubeAPI, client: TestClient) -> None:
    kube_api.add_pod(NS, "p1", UID)
    kube_api.delay_next(10, times=3)
    started = time.monotonic()
    error = bind(client, filtered=True)
    elapsed = time.monotonic() - started
    assert "Timeout" in error and "gave up after 3 attempts" in error
    # 3 x 0.5 s + back-off: it gave up long before the held 10 s answers, and inside the
    # scheduler's 5 s httpTimeout (the bound that matters)
    assert elapsed < 5.0
    kube_api.release_delays()
    assert kube_api.wait_idle(5)
    assert kube_api.bind_count(NS, "p1") <= 1


@pytest.mark.parametrize("filtered", [True, False])
def test_bind_connection_refused(settings: Settings, filtered: bool) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stack = build_service(settings, kube=kube_client(url, settings))
    with TestClient(stack.app) as c:
        started = time.monotonic()
        error = bind(c, filtered=filtered)
    assert "Unreachable" in error and "gave up after 3 attempts" in error
    assert time.monotonic() - started < 5  # the scheduler's httpTimeout: the bound that matters


def test_bind_without_any_kubernetes_client_answers_an_error() -> None:
    settings = parse_settings(policy())
    stack = build_service(settings)
    with TestClient(stack.app) as c:
        error = bind(c, filtered=True)
    assert "KUBECONFIG" in error


async def test_concurrent_duplicate_binds_make_one_api_call(
    kube_api: FakeKubeAPI, settings: Settings
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    stack = build_service(settings, kube=kube_client(kube_api, settings))
    kube_api.delay_next(0.3)  # the first call is slow; the duplicates arrive meanwhile
    transport = httpx.ASGITransport(app=stack.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as c:
        body = orjson.dumps(binding_args(UID, "p1", "node-1"))
        headers = {"Content-Type": "application/json"}
        answers = await asyncio.wait_for(
            asyncio.gather(*(c.post("/bind", content=body, headers=headers) for _ in range(16))),
            timeout=10,
        )
    assert [a.status_code for a in answers] == [200] * 16
    assert {a.json()["Error"] for a in answers} == {""}
    assert len(kube_api.requests_to("GET", GET_POD)) == 1
    assert len(kube_api.requests_to("POST", BINDING)) == 1
    assert kube_api.bind_count(NS, "p1") == 1


async def test_concurrent_binds_of_one_uid_to_two_nodes_bind_once(
    kube_api: FakeKubeAPI, settings: Settings
) -> None:
    kube_api.add_pod(NS, "p1", UID)
    stack = build_service(settings, kube=kube_client(kube_api, settings))
    kube_api.delay_next(0.3)
    transport = httpx.ASGITransport(app=stack.app)
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(transport=transport, base_url="http://extender") as c:
        answers = await asyncio.wait_for(
            asyncio.gather(
                *(
                    c.post(
                        "/bind",
                        content=orjson.dumps(binding_args(UID, "p1", f"node-{1 + i % 2}")),
                        headers=headers,
                    )
                    for i in range(8)
                )
            ),
            timeout=10,
        )
        # after the dust settles, a bind to the other node is refused, not attempted
        late = await c.post(
            "/bind", content=orjson.dumps(binding_args(UID, "p1", "node-2")), headers=headers
        )
    assert [a.status_code for a in answers] == [200] * 8
    errors = [a.json()["Error"] for a in answers]
    # the node-1 binds share the one call's success; the node-2 ones waited for it and
    # were then refused: none of them is told "bound" for a node the pod is not on
    assert errors[0::2] == [""] * 4
    assert all("already bound to node 'node-1'" in e for e in errors[1::2])
    assert kube_api.bind_count(NS, "p1") == 1
    assert len(kube_api.requests_to("POST", BINDING)) == 1
    assert "already bound to node 'node-1'" in late.json()["Error"]


async def test_a_cancelled_bind_releases_its_waiting_duplicates(
    kube_api: FakeKubeAPI, settings: Settings
) -> None:
    """uvicorn cancels requests that outlast the grace period: a duplicate waiting on the
    cancelled call gets an Error at once instead of hanging."""
    kube_api.add_pod(NS, "p1", UID)
    stack = build_service(settings, kube=kube_client(kube_api, settings))
    kube_api.delay_next(60)  # the first call's request is held until released below
    args = parse_binding_args(orjson.dumps(binding_args(UID, "p1", "node-1")))
    first = asyncio.create_task(stack.binder.bind(args))
    await wait_until_async(lambda: kube_api.requests, 30, "the first bind reached the API")
    assert stack.binder.binding(UID)
    duplicate_call = stack.binder.bind(args)
    duplicate = asyncio.create_task(duplicate_call)
    await wait_until_async(
        lambda: inspect.getcoroutinestate(duplicate_call) == inspect.CORO_SUSPENDED,
        30,
        "the duplicate waits for the first call",
    )
    assert len(kube_api.requests) == 1 and not first.done()  # the first is still held
    first.cancel()
    error = await asyncio.wait_for(duplicate, timeout=30)  # the first is held for 60 s
    assert "interrupted" in error
    assert not stack.binder.binding(UID)
    assert await stack.binder.drain(0.1)
    kube_api.release_delays()
    assert kube_api.wait_idle(30)
