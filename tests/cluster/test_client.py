"""extender.cluster.client.KubeClient (async, over aiohttp) against
tests.harness.kubeapi.FakeKubeAPI.

The first tests pin the fake server to the answers a real kube-apiserver gave
(fixtures/kube-apiserver/), sent with the `kubernetes` client's own request machinery;
the rest drive KubeClient through it: binds, reads, lists, patches, watches, auth, TLS,
retries and error mapping.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import json
import os
import random
import ssl
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar, Protocol

import kubernetes.client
import pytest
import trustme

from extender.cluster.client import KubeClient, watching
from extender.cluster.client.api import MAX_RETRY_WAIT
from extender.cluster.client.auth import AuthHeaders, load_api_client
from extender.cluster.client.errors import (
    KubeAlreadyBound,
    KubeError,
    KubeEvictionRefused,
    KubeUnavailable,
)
from extender.decisions.model import PodEvent
from extender.decisions.pods import PodFacts, api_time
from extender.errors.backoff import Backoff
from tests.harness.fixtures import APISERVER
from tests.harness.kubeapi import FakeKubeAPI, client_for, write_kubeconfig
from tests.harness.loopback import LoopbackServer, free_port, wait_until_async

NS = "decice"
UID1 = "73ab3ef1-e003-41ed-9126-19b3b3f3f049"
UID2 = "e63a0047-c806-4c7b-943d-7f05c8a7d03f"
UID3 = "5d83df66-a385-45af-8448-b5dbc1ebfb99"
BINDING_P1 = f"/api/v1/namespaces/{NS}/pods/p1/binding"
POD_P1 = f"/api/v1/namespaces/{NS}/pods/p1"
OTHER_UID = "00000000-0000-4000-8000-000000000000"


def fixture(name: str) -> dict[str, Any]:
    """A captured answer from tests/fixtures/kube-apiserver; a missing file is an error."""
    doc: dict[str, Any] = json.loads((APISERVER / f"{name}.json").read_text())
    return doc


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    """The cluster of the fixtures: pods p1, p2, p3 pending in `decice`, two nodes."""
    with FakeKubeAPI() as server:
        server.add_pod(NS, "p1", UID1)
        server.add_pod(NS, "p2", UID2)
        server.add_pod(NS, "p3", UID3)
        server.add_node("node-1", "10.0.0.1", cpu="4")
        server.add_node("node-2", "10.0.0.2", cpu="3500m")
        yield server


@pytest.fixture
def api_client(api: FakeKubeAPI) -> Iterator[kubernetes.client.ApiClient]:
    client = client_for(api)
    yield client
    close(client)


def close(client: kubernetes.client.ApiClient) -> None:
    closer: Callable[[], None] = client.close  # unannotated in the kubernetes package
    closer()


def configuration_for(
    server: FakeKubeAPI | str, token: str | None = None
) -> kubernetes.client.Configuration:
    """A Configuration for the fake server (its token unless `token`), or for a URL."""
    if isinstance(server, str):
        return kubernetes.client.Configuration(host=server)
    client = client_for(server, token=token)
    configuration: kubernetes.client.Configuration = client.configuration
    close(client)
    return configuration


class Make(Protocol):
    def __call__(
        self,
        target: FakeKubeAPI | kubernetes.client.Configuration | kubernetes.client.ApiClient,
        *,
        token: str | None = None,
        timeout: float = 0.3,
        retries: int = 2,
        backoff: float = 0.02,
    ) -> KubeClient: ...


@pytest.fixture
async def kube() -> AsyncIterator[Make]:
    """Makes KubeClients (short timeouts and back-off) and closes them after the test."""
    made: list[KubeClient] = []

    def make(
        target: FakeKubeAPI | kubernetes.client.Configuration | kubernetes.client.ApiClient,
        *,
        token: str | None = None,
        timeout: float = 0.3,
        retries: int = 2,
        backoff: float = 0.02,
    ) -> KubeClient:
        if isinstance(target, FakeKubeAPI):
            target = configuration_for(target, token)
        client = KubeClient(target, timeout=timeout, retries=retries, backoff=backoff)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


def send(client: kubernetes.client.ApiClient, method: str, path: str, body: Any) -> tuple[int, Any]:
    """Replay a raw request with the kubernetes client's own request machinery."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = client.param_serialize(
        method=method,
        resource_path=path,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = client.call_api(*request, _request_timeout=2.0)
    read: Callable[[], bytes] = response.read
    return response.status, json.loads(read())


async def idle(server: FakeKubeAPI) -> bool:
    """The fake server finished every request (stalled ones included), off the loop."""
    return await asyncio.to_thread(server.wait_idle)


# --- the fake server answers like the real one ----------------------------------------

_BAD_BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "p3", "namespace": NS, "uid": UID3},
    "target": {"apiVersion": "v1", "kind": "Node"},
}


def _prepare(scenario: str, server: FakeKubeAPI) -> None:
    if scenario in ("bind-already-bound-other-node", "bind-already-bound-same-node"):
        server.add_pod(NS, "p1", UID1, node_name="node-1")
    elif scenario == "bind-forbidden":
        server.fail_next(403)


@pytest.mark.parametrize(
    "scenario",
    [
        "bind-ok",
        "bind-already-bound-other-node",
        "bind-already-bound-same-node",
        "bind-uid-mismatch",
        "bind-pod-missing",
        "bind-node-missing",
        "bind-forbidden",
        "bind-bad-body",
        "get-pod-missing",
    ],
)
def test_fake_answers_like_the_real_apiserver(
    scenario: str, api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    fx = fixture(scenario)
    _prepare(scenario, api)
    body = fx["request"]["body"]
    if scenario == "bind-bad-body":
        body = _BAD_BINDING
    status, answer = send(api_client, fx["request"]["method"], fx["request"]["path"], body)
    assert status == fx["status"]
    assert answer == fx["response"]


def test_fake_unauthorized_like_the_real_apiserver() -> None:
    fx = fixture("bind-unauthorized")
    with FakeKubeAPI(token="right-token") as server:
        server.add_pod(NS, "p3", UID3)
        client = client_for(server, token="wrong-token")
        status, answer = send(client, "POST", fx["request"]["path"], fx["request"]["body"])
        close(client)
        assert server.bind_count(NS, "p3") == 0
    assert (status, answer) == (fx["status"], fx["response"])


def test_fake_pod_has_the_real_shape(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    fx = fixture("get-pod-bound")
    api.add_pod(NS, "p1", UID1, scheduler_name="manual", node_name="node-1")
    status, pod = send(api_client, "GET", fx["request"]["path"], None)
    real = fx["response"]
    assert status == fx["status"] == 200
    for key in ("kind", "apiVersion"):
        assert pod[key] == real[key]
    for key in ("name", "namespace", "uid"):
        assert pod["metadata"][key] == real["metadata"][key]
    assert pod["spec"]["nodeName"] == real["spec"]["nodeName"]
    assert pod["spec"]["schedulerName"] == real["spec"]["schedulerName"]
    assert pod["spec"]["containers"][0]["resources"] == real["spec"]["containers"][0]["resources"]
    assert set(pod) == set(real)


def test_fake_binding_then_get_shows_node(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    bind = fixture("bind-ok")["request"]
    assert send(api_client, "POST", bind["path"], bind["body"])[0] == 201
    status, pod = send(api_client, "GET", f"/api/v1/namespaces/{NS}/pods/p1", None)
    assert status == 200
    assert pod["spec"]["nodeName"] == "node-1"
    assert api.bind_count(NS, "p1") == 1


# --- bind ---------------------------------------------------------------------------------


async def test_bind_sends_the_binding_the_real_server_accepted(
    api: FakeKubeAPI, kube: Make
) -> None:
    assert await kube(api).bind(NS, "p1", UID1, "node-1") == "bound"
    (request,) = api.requests_to("POST", BINDING_P1)
    assert request.body == fixture("bind-ok")["request"]["body"]
    assert request.query == {}
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    pod = api.pod(NS, "p1")
    assert pod is not None
    assert pod["spec"]["nodeName"] == "node-1"
    assert api.bind_count(NS, "p1") == 1


async def test_bind_without_uid_sends_no_precondition(api: FakeKubeAPI, kube: Make) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 "):
        await kube(api).bind(NS, "ghost", "", "node-1")
    (request,) = api.requests
    assert request.body == fixture("bind-pod-missing")["request"]["body"]


async def test_bind_to_unknown_node_is_accepted_by_the_api(api: FakeKubeAPI, kube: Make) -> None:
    # Why the caller must check the node against what its filter passed.
    assert await kube(api).bind(NS, "p2", UID2, "node-404") == "bound"


async def test_second_bind_to_same_node_is_already_bound(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    assert await client.bind(NS, "p1", UID1, "node-1") == "bound"
    assert await client.bind(NS, "p1", UID1, "node-1") == "already-bound"
    assert api.bind_count(NS, "p1") == 1
    assert len(api.requests_to("POST", BINDING_P1)) == 2


async def test_bind_to_other_node_raises_already_bound(api: FakeKubeAPI, kube: Make) -> None:
    api.add_pod(NS, "p1", UID1, node_name="node-1")
    with pytest.raises(KubeAlreadyBound) as caught:
        await kube(api).bind(NS, "p1", UID1, "node-2")
    err = caught.value
    assert err.node == "node-1"
    assert (err.status, err.reason) == (409, "Conflict")
    assert str(err) == (
        'Kubernetes API 409 Conflict: Operation cannot be fulfilled on pods/binding "p1": '
        'pod p1 is already assigned to node "node-1"'
    )
    assert len(api.requests) == 1  # a 409 is not retried
    pod = api.pod(NS, "p1")
    assert pod is not None and pod["spec"]["nodeName"] == "node-1"


async def test_uid_mismatch_is_conflict(api: FakeKubeAPI, kube: Make) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 409 ") as caught:
        await kube(api).bind(NS, "p2", OTHER_UID, "node-1")
    assert caught.value.status == 409
    assert not isinstance(caught.value, KubeAlreadyBound)
    assert "Precondition failed: UID in precondition" in caught.value.message
    assert api.bind_count(NS, "p2") == 0
    assert len(api.requests) == 1


async def test_missing_pod_is_not_found(api: FakeKubeAPI, kube: Make) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 ") as caught:
        await kube(api).bind(NS, "ghost", "a-uid", "node-1")
    assert str(caught.value) == 'Kubernetes API 404 NotFound: pods "ghost" not found'
    assert len(api.requests) == 1


async def test_forbidden(api: FakeKubeAPI, kube: Make) -> None:
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        await kube(api).bind(NS, "p3", UID3, "node-1")
    assert str(caught.value) == (
        'Kubernetes API 403 Forbidden: pods "p3" is forbidden: User '
        '"system:serviceaccount:decice:nobody" cannot create resource "pods/binding" in API '
        'group "" in the namespace "decice"'
    )
    assert len(api.requests) == 1
    assert api.bind_count(NS, "p3") == 0


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
async def test_transient_answer_is_retried_once(code: int, api: FakeKubeAPI, kube: Make) -> None:
    api.fail_next(code)
    assert await kube(api).bind(NS, "p1", UID1, "node-1") == "bound"
    assert len(api.requests_to("POST", BINDING_P1)) == 2
    assert api.bind_count(NS, "p1") == 1


@pytest.mark.parametrize("retries", [0, 2])
async def test_persistent_500_gives_up(retries: int, api: FakeKubeAPI, kube: Make) -> None:
    api.fail_next(500, times=10)
    with pytest.raises(KubeUnavailable) as caught:
        await kube(api, retries=retries).bind(NS, "p1", UID1, "node-1")
    assert len(api.requests) == retries + 1
    err = caught.value
    assert (err.status, err.reason) == (500, "InternalError")
    assert f"gave up after {retries + 1} attempts" in str(err)
    assert str(err).startswith("Kubernetes API 500 InternalError: POST ")
    assert api.bind_count(NS, "p1") == 0


async def test_retries_wait_a_draw_under_a_doubling_ceiling(api: FakeKubeAPI) -> None:
    api.fail_next(503, times=3)
    client = KubeClient(
        configuration_for(api), timeout=0.3, retries=2, backoff=0.1, rng=random.Random(5)
    )
    # The same seed draws the same waits: full jitter under 0.1 s, then under 0.2 s.
    same = Backoff(base=0.1, cap=MAX_RETRY_WAIT, rng=random.Random(5))
    waits = [same.wait(1), same.wait(2)]
    assert 0 <= waits[0] <= 0.1 and 0 <= waits[1] <= 0.2
    started = time.monotonic()
    try:
        with pytest.raises(KubeUnavailable):
            await client.bind(NS, "p1", UID1, "node-1")
    finally:
        await client.close()
    assert time.monotonic() - started >= sum(waits)
    assert len(api.requests_to("POST", BINDING_P1)) == 3


async def test_slow_answer_is_retried(api: FakeKubeAPI, kube: Make) -> None:
    # The first request stalls before it takes effect; the retry binds.
    api.delay_next(1.0)
    assert await kube(api).bind(NS, "p1", UID1, "node-1") == "bound"
    assert len(api.requests_to("POST", BINDING_P1)) == 2
    api.release_delays()
    assert await idle(api)
    assert api.bind_count(NS, "p1") == 1  # the stalled first request found it bound


async def test_lost_answer_then_retry_is_already_bound(api: FakeKubeAPI, kube: Make) -> None:
    # The first bind takes effect but its answer comes too late: the retry gets a 409
    # naming the node we asked for, which is success.
    api.delay_next(1.0, after=True)
    assert await kube(api).bind(NS, "p1", UID1, "node-1") == "already-bound"
    api.release_delays()
    assert await idle(api)
    assert api.bind_count(NS, "p1") == 1
    assert len(api.requests_to("POST", BINDING_P1)) == 2


async def test_always_slow_gives_up(api: FakeKubeAPI, kube: Make) -> None:
    api.delay_next(2.0, times=5)
    started = time.monotonic()
    with pytest.raises(KubeUnavailable) as caught:
        await kube(api, timeout=0.2, retries=1).bind(NS, "p1", UID1, "node-1")
    # gave up on its own timeouts: it never waited for the server's 2 s answer
    assert time.monotonic() - started < 2.0
    err = caught.value
    assert err.status is None and err.reason == "Timeout"
    assert "gave up after 2 attempts" in str(err)
    assert "within 0.2 s" in str(err)
    assert len(api.requests) == 2
    api.release_delays()
    assert await idle(api)
    assert api.bind_count(NS, "p1") == 1  # the stalled requests did bind, once


async def test_connection_refused_is_unavailable(kube: Make) -> None:
    port = free_port()
    with pytest.raises(KubeUnavailable) as caught:
        await kube(configuration_for(f"http://127.0.0.1:{port}")).bind(NS, "p1", UID1, "node-1")
    err = caught.value
    assert err.status is None and err.reason == "Unreachable"
    assert f"cannot connect to 127.0.0.1:{port}: connection refused" in str(err)
    assert "gave up after 3 attempts" in str(err)
    assert "\n" not in str(err)


async def test_unknown_host_is_unavailable(kube: Make) -> None:
    client = kube(configuration_for("http://no-such-host.invalid:6443"), retries=0, timeout=5)
    with pytest.raises(KubeUnavailable) as caught:
        await client.get_pod(NS, "p1")
    assert caught.value.reason == "Unreachable"
    assert "cannot resolve no-such-host.invalid" in str(caught.value)


async def test_server_closing_the_connection_is_retried(kube: Make) -> None:
    class Hangup(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.close_connection = True  # no answer at all

    with LoopbackServer(Hangup) as server, pytest.raises(KubeUnavailable) as caught:
        await kube(configuration_for(server.url), retries=1).get_pod(NS, "p1")
    err = caught.value
    assert err.reason == "Unreachable" and "gave up after 2 attempts" in str(err)


@pytest.mark.parametrize(
    ("namespace", "name", "node"),
    [("", "p1", "node-1"), (NS, "", "node-1"), (NS, "p1", "")],
)
async def test_bind_refuses_empty_arguments_before_any_request(
    namespace: str, name: str, node: str, api: FakeKubeAPI, kube: Make
) -> None:
    with pytest.raises(ValueError):
        await kube(api).bind(namespace, name, UID1, node)
    with pytest.raises(ValueError):
        await kube(api).annotate_pod(namespace or name or "", "", UID1, {})
    assert api.requests == []


# --- auth ---------------------------------------------------------------------------------


async def test_unauthorized_never_shows_the_token(kube: Make) -> None:
    with FakeKubeAPI(token="right-token") as server:
        server.add_pod(NS, "p3", UID3)
        client = kube(server, token="s3cr3t-wrong-token")
        with pytest.raises(KubeError, match=r"^Kubernetes API 401 ") as caught:
            await client.bind(NS, "p3", UID3, "node-1")
        assert len(server.requests) == 1
        assert server.requests[0].headers["authorization"] == "Bearer s3cr3t-wrong-token"
    err = caught.value
    assert (err.status, err.reason) == (401, "Unauthorized")
    assert str(err) == "Kubernetes API 401 Unauthorized: Unauthorized"
    assert "s3cr3t" not in str(err) and "s3cr3t" not in repr(err)


async def test_right_token_binds(kube: Make) -> None:
    with FakeKubeAPI(token="right-token") as server:
        server.add_pod(NS, "p3", UID3)
        assert await kube(server).bind(NS, "p3", UID3, "node-1") == "bound"


async def test_no_token_sends_no_authorization(api: FakeKubeAPI, kube: Make) -> None:
    await kube(api).get_pod(NS, "p1")
    assert "authorization" not in api.requests[0].headers


async def test_token_refresh_hook_is_asked_again_after_a_401(kube: Make) -> None:
    """In-cluster tokens rotate, exec plugins renew theirs: the configuration's refresh
    hook is asked for the first request, its headers are reused for seconds (asking costs
    ~230 us with the kubeconfig loader's hook), and a 401 makes the next request ask again;
    the token it gives is the one sent."""
    tokens = iter(["expired-token", "renewed-token"])
    calls = []

    def refresh(configuration: Any) -> None:
        calls.append(1)
        configuration.api_key["BearerToken"] = next(tokens)

    with FakeKubeAPI(token="renewed-token") as server:
        server.add_pod(NS, "p1", UID1)
        configuration: Any = configuration_for(server, token="first-token")
        configuration.refresh_api_key_hook = refresh
        client = kube(configuration)
        with pytest.raises(KubeError, match=r"^Kubernetes API 401 "):
            await client.get_pod(NS, "p1")
        assert (await client.get_pod(NS, "p1")).uid == UID1
        assert await client.bind(NS, "p1", UID1, "node-1") == "bound"
        sent = [r.headers["authorization"] for r in server.requests]
    assert sent == ["Bearer expired-token", "Bearer renewed-token", "Bearer renewed-token"]
    assert len(calls) == 2  # the first request, and the one after the 401


def test_auth_headers_are_asked_again_once_their_seconds_are_up() -> None:
    now = [100.0]
    calls: list[int] = []

    class Configuration:
        def auth_settings(self) -> dict[str, Any]:
            calls.append(1)
            token = f"t{len(calls)}"
            return {"BearerToken": {"in": "header", "key": "authorization", "value": token}}

    auth = AuthHeaders(Configuration(), {"X-Static": "s"}, ttl=10.0, clock=lambda: now[0])
    first = auth.get()
    assert first == {"X-Static": "s", "Authorization": "t1"}
    first["Content-Type"] = "application/json"  # a copy: the cache is not changed
    now[0] += 9.9
    assert auth.get() == {"X-Static": "s", "Authorization": "t1"} and len(calls) == 1
    now[0] += 0.1
    assert auth.get()["Authorization"] == "t2"
    auth.expire()
    assert auth.get()["Authorization"] == "t3"


async def test_basic_auth(api: FakeKubeAPI, kube: Make) -> None:
    configuration = configuration_for(api.url)
    configuration.username, configuration.password = "admin", "pa:ss"
    await kube(configuration).get_pod(NS, "p1")
    expected = "Basic " + base64.b64encode(b"admin:pa:ss").decode()
    assert api.requests[0].headers["authorization"] == expected


async def test_through_a_proxy_with_its_headers(api: FakeKubeAPI, kube: Make) -> None:
    # The fake server serves the proxy's absolute-form requests itself.
    configuration = configuration_for("http://kube.invalid:6443")
    configuration.proxy = api.url
    configuration.proxy_headers = {"Proxy-Authorization": "Basic cHJveHk6cHc="}
    assert await kube(configuration).bind(NS, "p1", UID1, "node-1") == "bound"
    (request,) = api.requests
    assert request.headers["host"] == "kube.invalid:6443"
    assert request.headers["proxy-authorization"] == "Basic cHJveHk6cHc="


async def test_the_proxy_of_the_environment_and_no_proxy(
    api: FakeKubeAPI, kube: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$HTTP_PROXY / $HTTPS_PROXY and $NO_PROXY, as client-go and the `kubernetes` package
    read them: calls and watches take the proxy, one path with or without it."""
    monkeypatch.setenv("HTTP_PROXY", api.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = kube(configuration_for("http://kube.invalid:6443"))
    assert await client.bind(NS, "p1", UID1, "node-1") == "bound"
    version = (await client.list_page("/api/v1/pods", limit=1))["metadata"]["resourceVersion"]
    api.assign(NS, "p2", "node-2")
    events = await collect(client, "/api/v1/pods", version)
    assert [e["object"]["metadata"]["name"] for e in events if e["type"] == "MODIFIED"] == ["p2"]
    assert {r.headers["host"] for r in api.requests} == {"kube.invalid:6443"}
    monkeypatch.setenv("NO_PROXY", "kube.invalid")
    bypassing = kube(configuration_for("http://kube.invalid:6443"), retries=0, timeout=5)
    with pytest.raises(KubeUnavailable, match=r"cannot resolve kube\.invalid"):
        await bypassing.get_pod(NS, "p1")


def test_a_socks_proxy_is_a_config_error() -> None:
    configuration = configuration_for("http://kube.invalid:6443")
    configuration.proxy = "socks5://127.0.0.1:1080"
    with pytest.raises(KubeError, match=r"^Kubernetes API ConfigError: SOCKS"):
        KubeClient(configuration)


# --- TLS ------------------------------------------------------------------------------------


class TLSFront:
    """TLS in front of a FakeKubeAPI (which speaks plain HTTP), in the test's event loop:
    `context` is the server side (certificate, and client certificates if it asks)."""

    def __init__(self, api: FakeKubeAPI, context: ssl.SSLContext) -> None:
        self._target = int(api.url.rsplit(":", 1)[1])
        self._context = context
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.url = ""

    async def __aenter__(self) -> TLSFront:
        self._server = await asyncio.start_server(
            self._connection, "127.0.0.1", 0, ssl=self._context
        )
        self.url = f"https://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:  # the client may keep its connection: cut it
            writer.close()
        await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        self._writers.append(up_writer)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError):
        pass
    finally:
        writer.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A server CA, a client CA, a rogue CA; a server certificate for 127.0.0.1 and one
    for kubernetes.default.svc only; a client certificate; their files."""
    where = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, rogue_ca = trustme.CA(), trustme.CA(), trustme.CA()
    client = client_ca.issue_cert("decice-extender.decice.svc")
    files = {
        "ca": where / "ca.pem",
        "rogue_ca": where / "rogue.pem",
        "cert": where / "client.pem",
        "key": where / "client-key.pem",
    }
    server_ca.cert_pem.write_to_path(str(files["ca"]))
    rogue_ca.cert_pem.write_to_path(str(files["rogue_ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    client.private_key_pem.write_to_path(str(files["key"]))
    return {
        "files": {k: str(v) for k, v in files.items()},
        "ip_cert": server_ca.issue_cert("127.0.0.1"),
        "svc_cert": server_ca.issue_cert("kubernetes.default.svc"),
        "client_ca": client_ca,
    }


def server_context(
    pki: dict[str, Any], cert: str = "ip_cert", mutual: bool = False
) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    pki[cert].configure_cert(context)
    if mutual:
        pki["client_ca"].configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def tls_configuration(url: str, pki: dict[str, Any], **settings: Any) -> Any:
    configuration = configuration_for(url)
    configuration.ssl_ca_cert = pki["files"]["ca"]
    for key, value in settings.items():
        setattr(configuration, key, value)
    return configuration


async def test_tls_with_the_cluster_ca(api: FakeKubeAPI, pki: dict[str, Any], kube: Make) -> None:
    async with TLSFront(api, server_context(pki)) as front:
        assert front.url.startswith("https://")
        assert await kube(tls_configuration(front.url, pki)).bind(NS, "p1", UID1, "node-1") == (
            "bound"
        )
    assert api.bind_count(NS, "p1") == 1


async def test_tls_untrusted_server_is_a_tls_error_not_retried(
    api: FakeKubeAPI, pki: dict[str, Any], kube: Make
) -> None:
    async with TLSFront(api, server_context(pki)) as front:
        configuration = tls_configuration(front.url, pki, ssl_ca_cert=pki["files"]["rogue_ca"])
        with pytest.raises(KubeError) as caught:
            await kube(configuration).bind(NS, "p1", UID1, "node-1")
    err = caught.value
    assert not isinstance(err, KubeUnavailable)
    assert err.status is None and err.reason == "TLSError"
    assert str(err).startswith("Kubernetes API TLSError: ")
    assert "CERTIFICATE_VERIFY_FAILED" in str(err) and "gave up" not in str(err)
    assert api.requests == []


async def test_tls_without_verification(api: FakeKubeAPI, pki: dict[str, Any], kube: Make) -> None:
    async with TLSFront(api, server_context(pki)) as front:
        configuration = tls_configuration(
            front.url, pki, ssl_ca_cert=pki["files"]["rogue_ca"], verify_ssl=False
        )
        assert (await kube(configuration).get_pod(NS, "p1")).uid == UID1


async def test_tls_server_name(api: FakeKubeAPI, pki: dict[str, Any], kube: Make) -> None:
    """A certificate for kubernetes.default.svc, reached at 127.0.0.1: tls_server_name
    (kubeconfig `tls-server-name`) names the host to verify."""
    async with TLSFront(api, server_context(pki, "svc_cert")) as front:
        with pytest.raises(KubeError) as caught:
            await kube(tls_configuration(front.url, pki)).get_pod(NS, "p1")
        assert caught.value.reason == "TLSError"
        named = tls_configuration(front.url, pki, tls_server_name="kubernetes.default.svc")
        assert (await kube(named).get_pod(NS, "p1")).uid == UID1


async def test_mutual_tls_with_client_certificate(
    api: FakeKubeAPI, pki: dict[str, Any], kube: Make
) -> None:
    async with TLSFront(api, server_context(pki, mutual=True)) as front:
        files = pki["files"]
        with_cert = tls_configuration(
            front.url, pki, cert_file=files["cert"], key_file=files["key"]
        )
        assert await kube(with_cert).bind(NS, "p1", UID1, "node-1") == "bound"
        with pytest.raises(KubeError):  # the server hangs up on a client without one
            await kube(tls_configuration(front.url, pki), retries=0).get_pod(NS, "p1")
    assert len(api.requests) == 1


def test_missing_tls_files_are_a_config_error(tmp_path: Path) -> None:
    configuration = configuration_for("https://127.0.0.1:6443")
    configuration.ssl_ca_cert = str(tmp_path / "missing-ca.pem")
    with pytest.raises(KubeError, match=r"^Kubernetes API ConfigError: bad TLS settings"):
        KubeClient(configuration)


# --- reads ----------------------------------------------------------------------------------


async def test_get_pod(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    pod = await client.get_pod(NS, "p1")
    assert pod == PodFacts(
        namespace=NS,
        name="p1",
        uid=UID1,
        scheduler_name="decice_sched",
        cpu_request=0.5,
        node_name="",
        created=pod.created,
    )
    assert api_time(pod.created) is not None
    await client.bind(NS, "p1", UID1, "node-2")
    assert (await client.get_pod(NS, "p1")).node_name == "node-2"


async def test_get_pod_cpu_sums_containers(api: FakeKubeAPI, kube: Make) -> None:
    api.add_pod(NS, "multi", "u-multi", cpu_request=["250m", None, "1"])
    api.add_pod(NS, "none", "u-none", cpu_request=None, scheduler_name="default-scheduler")
    client = kube(api)
    assert (await client.get_pod(NS, "multi")).cpu_request == pytest.approx(1.25)
    none = await client.get_pod(NS, "none")
    assert none.cpu_request is None
    assert none.scheduler_name == "default-scheduler"


async def test_get_pod_errors(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 "):
        await client.get_pod(NS, "ghost")
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        await client.get_pod(NS, "p1")
    assert 'cannot get resource "pods"' in str(caught.value)
    api.fail_next(503)
    assert (await client.get_pod(NS, "p1")).uid == UID1


async def test_list_nodes(api: FakeKubeAPI, kube: Make) -> None:
    api.add_node("node-3", ["10.0.0.3", "fd00::3"], cpu=None)
    api.add_node("node-4", None, cpu="16")
    nodes, version = await kube(api).list_nodes()
    assert [(n.name, n.internal_ips, n.cpu_cores) for n in nodes] == [
        ("node-1", ("10.0.0.1",), 4.0),
        ("node-2", ("10.0.0.2",), 3.5),
        ("node-3", ("10.0.0.3", "fd00::3"), None),
        ("node-4", (), 16.0),
    ]
    assert dict(nodes[0].labels)["kubernetes.io/hostname"] == "node-1"
    assert version == api.resource_version


async def test_list_nodes_follows_continue(api: FakeKubeAPI, kube: Make) -> None:
    for i in range(3, 602):
        api.add_node(f"node-{i:04d}", f"10.1.{i // 256}.{i % 256}")
    version = api.resource_version
    api.fail_next(503)  # the first page is retried
    nodes, listed = await kube(api).list_nodes()
    assert len(nodes) == 601
    assert len({n.name for n in nodes}) == 601
    assert listed == version
    pages = api.requests_to("GET", "/api/v1/nodes")
    assert len(pages) == 3
    assert pages[1].query == {"limit": ["500"]}
    assert pages[2].query == {"limit": ["500"], "continue": ["500"]}


async def test_list_nodes_forbidden(api: FakeKubeAPI, kube: Make) -> None:
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        await kube(api).list_nodes()
    assert 'cannot list resource "nodes"' in str(caught.value)


async def test_list_page_learns_the_resource_version(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    page = await client.list_page("/api/v1/pods", limit=1)
    real = fixture("list-pods-limit-1")["response"]
    assert page["kind"] == real["kind"] == "PodList"
    assert page["metadata"]["resourceVersion"] == api.resource_version
    assert len(page["items"]) == 1
    token = page["metadata"]["continue"]
    following = await client.list_page("/api/v1/pods", limit=5, continue_token=token)
    assert len(following["items"]) == 2
    assert "continue" not in following["metadata"]
    first, second = api.requests_to("GET", "/api/v1/pods")
    assert first.query == {"limit": ["1"]}
    assert second.query == {"limit": ["5"], "continue": [token]}


async def test_list_page_errors(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    api.fail_next(503)
    assert (await client.list_page("/api/v1/nodes", limit=1))["kind"] == "NodeList"
    assert len(api.requests) == 2
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 "):
        await client.list_page("/api/v1/nodes", limit=1)
    with pytest.raises(ValueError):
        await client.list_page("/api/v1/nodes", limit=0)


class Canned(BaseHTTPRequestHandler):
    """Answers every GET with `body` (HTTP/1.0: the body ends with the connection)."""

    body: ClassVar[bytes] = b""
    content_type: ClassVar[str] = "application/json"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def canned(body: bytes, content_type: str = "application/json") -> LoopbackServer:
    handler = type("CannedAnswer", (Canned,), {"body": body, "content_type": content_type})
    return LoopbackServer(handler, name="canned")


async def test_an_answer_that_is_not_json_is_a_bad_response(kube: Make) -> None:
    portal = canned(b"<html>a captive portal</html>", "text/html")
    with portal as server, pytest.raises(KubeError) as caught:
        await kube(configuration_for(server.url)).get_pod(NS, "p1")
    err = caught.value
    assert not isinstance(err, KubeUnavailable) and err.reason == "BadResponse"
    assert "answer is not JSON" in str(err)


# --- annotate_pod ---------------------------------------------------------------------------


async def test_annotate_pod_sends_a_merge_patch_with_the_uid(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    await client.annotate_pod(NS, "p1", UID1, {"decice.io/metrics-recovered": "1700000000"})
    pod = api.pod(NS, "p1")
    assert pod is not None
    assert pod["metadata"]["annotations"] == {"decice.io/metrics-recovered": "1700000000"}
    (request,) = api.requests_to("PATCH", POD_P1)
    assert request.headers["content-type"] == "application/merge-patch+json"
    assert request.body == {
        "metadata": {"uid": UID1, "annotations": {"decice.io/metrics-recovered": "1700000000"}}
    }
    await client.annotate_pod(NS, "p1", UID1, {"decice.io/metrics-recovered": None, "a": "b"})
    pod = api.pod(NS, "p1")
    assert pod is not None and pod["metadata"]["annotations"] == {"a": "b"}


async def test_annotate_a_missing_pod_is_not_found(api: FakeKubeAPI, kube: Make) -> None:
    with pytest.raises(KubeError) as caught:
        await kube(api).annotate_pod(NS, "ghost", UID1, {"a": "b"})
    err = caught.value
    assert (err.status, err.reason) == (404, "NotFound")
    assert str(err) == "Kubernetes API 404 NotFound: " + fixture("patch-pod-missing")["response"][
        "message"
    ].replace("nope", "ghost")
    assert len(api.requests) == 1


async def test_annotate_a_recreated_pod_is_invalid(api: FakeKubeAPI, kube: Make) -> None:
    with pytest.raises(KubeError) as caught:
        await kube(api).annotate_pod(NS, "p1", OTHER_UID, {"a": "b"})
    err = caught.value
    assert (err.status, err.reason) == (422, "Invalid")
    assert "metadata.uid" in err.message and "field is immutable" in err.message
    assert fixture("patch-uid-mismatch")["response"]["reason"] == "Invalid"
    pod = api.pod(NS, "p1")
    assert pod is not None and "annotations" not in pod["metadata"]
    assert len(api.requests) == 1  # not retried


async def test_annotate_forbidden_and_retried(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 Forbidden: "):
        await client.annotate_pod(NS, "p1", UID1, {"a": "b"})
    assert len(api.requests) == 1
    api.fail_next(503)
    await client.annotate_pod(NS, "p1", UID1, {"a": "b"})  # a merge patch is idempotent
    assert len(api.requests_to("PATCH", POD_P1)) == 3
    pod = api.pod(NS, "p1")
    assert pod is not None and pod["metadata"]["annotations"] == {"a": "b"}


# --- watch ------------------------------------------------------------------------------------


async def collect(
    client: KubeClient, path: str, version: str, timeout: int = 1, **options: Any
) -> list[dict[str, Any]]:
    """Every event of one watch, until the server ends it at `timeout` seconds."""
    return [
        event
        async for event in client.watch(
            path, resource_version=version, timeout_seconds=timeout, **options
        )
    ]


async def test_watch_replays_then_ends_at_its_timeout(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    version = (await client.list_page("/api/v1/pods", limit=1))["metadata"]["resourceVersion"]
    api.add_pod(NS, "p4", "uid-4")
    api.assign(NS, "p4", "node-1")
    api.delete_pod(NS, "p4")
    events = await collect(client, "/api/v1/pods", version)
    changes = [(e["type"], e["object"]["metadata"].get("name")) for e in events]
    assert [c for c in changes if c[0] != "BOOKMARK"] == [
        ("ADDED", "p4"),
        ("MODIFIED", "p4"),
        ("MODIFIED", "p4"),
        ("DELETED", "p4"),
    ]
    assert events[1]["object"]["spec"]["nodeName"] == "node-1"
    (request,) = api.requests_to("GET", "/api/v1/pods")[1:]
    assert request.query == {
        "watch": ["true"],
        "resourceVersion": [version],
        "allowWatchBookmarks": ["true"],
        "timeoutSeconds": ["1"],
    }
    # The server lets go of the stream just after writing its last chunk.
    await wait_until_async(lambda: api.open_watches("pods") == 0, 30, "the stream was closed")


async def test_watch_without_bookmarks(api: FakeKubeAPI, kube: Make) -> None:
    events = await collect(kube(api), "/api/v1/nodes", api.resource_version, bookmarks=False)
    assert events == []
    (request,) = api.requests
    assert "allowWatchBookmarks" not in request.query


async def test_watch_streams_changes_as_they_happen(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        stream = client.watch(
            "/api/v1/pods", resource_version=api.resource_version, timeout_seconds=30
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                seen.append(event)
                if event["type"] == "MODIFIED":
                    return

    task = asyncio.create_task(follow())
    await wait_until_async(lambda: api.open_watches("pods") == 1, 30, "the watch is open")
    api.assign(NS, "p2", "node-2")
    await asyncio.wait_for(task, 30)
    modified = [e for e in seen if e["type"] == "MODIFIED"]
    assert modified[0]["object"]["metadata"]["uid"] == UID2
    assert modified[0]["object"]["spec"]["nodeName"] == "node-2"
    # leaving early closed the stream: the server sees the client gone
    await wait_until_async(lambda: api.open_watches("pods") == 0, 30, "the watch is closed")


async def test_a_broken_watch_stream_is_unavailable(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    seen: list[str] = []

    async def follow() -> None:
        async for event in client.watch(
            "/api/v1/pods", resource_version=api.resource_version, timeout_seconds=30
        ):
            seen.append(event["type"])

    task = asyncio.create_task(follow())
    await wait_until_async(lambda: api.open_watches("pods") == 1, 30, "the watch is open")
    api.add_pod(NS, "p5", "uid-5")
    await wait_until_async(lambda: "ADDED" in seen, 30, "the first event arrived")
    api.break_watches()
    with pytest.raises(KubeUnavailable) as caught:
        await asyncio.wait_for(task, 30)
    err = caught.value
    assert err.reason == "Unreachable" and err.status is None
    assert "watch /api/v1/pods: the watch stream broke" in str(err)
    assert len(api.requests_to("GET", "/api/v1/pods")) == 1  # not retried


async def test_an_expired_watch_yields_the_error_event(api: FakeKubeAPI, kube: Make) -> None:
    old = api.resource_version
    api.add_pod(NS, "p6", "uid-6")
    api.expire_history()
    events = await collect(kube(api), "/api/v1/pods", old, timeout=5)
    (event,) = events
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")


@pytest.mark.parametrize("code", [403, 503])
async def test_a_refused_watch_raises_its_error_once(
    code: int, api: FakeKubeAPI, kube: Make
) -> None:
    api.fail_next(code, watch=True)
    with pytest.raises(KubeError) as caught:
        await collect(kube(api), "/api/v1/nodes", api.resource_version)
    err = caught.value
    assert err.status == code
    assert isinstance(err, KubeUnavailable) == (code == 503)
    assert str(err).startswith(f"Kubernetes API {code} ")
    assert "watch /api/v1/nodes: " in str(err)
    assert len(api.requests) == 1


async def test_a_watch_of_an_unreachable_server(kube: Make) -> None:
    port = free_port()
    with pytest.raises(KubeUnavailable) as caught:
        await collect(kube(configuration_for(f"http://127.0.0.1:{port}")), "/api/v1/pods", "1")
    assert caught.value.reason == "Unreachable"
    assert f"127.0.0.1:{port}: connection refused" in str(caught.value)


async def test_watch_lines_are_checked(kube: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    fx = fixture("watch-pods")
    lines = b"".join(json.dumps(e).encode() + b"\n" for e in fx["events"])
    with canned(lines + b'{"type": "ADDED", "object": {trunc\n', fx["content_type"]) as server:
        client = kube(configuration_for(server.url))
        seen: list[str] = []
        with pytest.raises(KubeError) as caught:
            async for event in client.watch(
                "/api/v1/pods", resource_version="217", timeout_seconds=8
            ):
                seen.append(event["type"])
        assert seen == [e["type"] for e in fx["events"]]
        assert caught.value.reason == "BadResponse" and "not JSON" in str(caught.value)
    # a line longer than the limit is refused before it is complete
    monkeypatch.setattr(watching, "MAX_WATCH_LINE", 1000)
    endless = canned(b'{"type": "ADDED", "object": "' + b"x" * 5000, fx["content_type"])
    with endless as server, pytest.raises(KubeError, match="longer than 1000 bytes"):
        await collect(kube(configuration_for(server.url)), "/api/v1/pods", "1")
    # a last line without its newline still counts; the end of the body ends the watch
    with canned(lines.rstrip(b"\n"), fx["content_type"]) as server:
        events = await collect(kube(configuration_for(server.url)), "/api/v1/pods", "1")
    assert events == fx["events"]


# --- the session and event loops --------------------------------------------------------


def test_one_client_in_several_event_loops(api: FakeKubeAPI) -> None:
    """Tests and the CLI run several loops in one process: the session follows, and one
    left open when its loop ends is closed by the loop's shutdown, in that loop."""
    client = KubeClient(configuration_for(api), timeout=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert asyncio.run(client.get_pod(NS, "p1")).uid == UID1  # never closed
        assert asyncio.run(client.get_pod(NS, "p2")).uid == UID2  # the first loop is gone

        async def twice() -> str:
            await client.close()  # the session of a loop that ended: nothing left to do
            await client.close()
            return await client.bind(NS, "p3", UID3, "node-1")  # reopens after close

        assert asyncio.run(twice()) == "bound"
        asyncio.run(client.close())
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []


def test_constructor_checks() -> None:
    configuration = configuration_for("http://127.0.0.1:6443")
    with pytest.raises(ValueError):
        KubeClient(configuration, timeout=0)
    with pytest.raises(ValueError):
        KubeClient(configuration, retries=-1)
    with pytest.raises(ValueError):
        KubeClient(configuration, max_connections=0)
    with pytest.raises(KubeError, match="ConfigError"):
        KubeClient(configuration_for("ftp://127.0.0.1"))


# --- setup and errors -------------------------------------------------------------------------


async def test_load_api_client_from_kubeconfig(tmp_path: Path, kube: Make) -> None:
    default_host = kubernetes.client.Configuration.get_default_copy().host
    with FakeKubeAPI(token="kc-token") as server:
        server.add_pod(NS, "p1", UID1)
        client = load_api_client(str(write_kubeconfig(tmp_path / "kc", server.url, "kc-token")))
        assert await kube(client.configuration).bind(NS, "p1", UID1, "node-1") == "bound"
        close(client)
    assert kubernetes.client.Configuration.get_default_copy().host == default_host


async def test_load_api_client_default_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kube: Make
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with FakeKubeAPI(token="kc-token") as server:
        server.add_node("node-1", "10.0.0.1")
        kubeconfig = write_kubeconfig(tmp_path / "kc", server.url, "kc-token")
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        client = load_api_client(None)
        nodes, _ = await kube(client).list_nodes()  # an ApiClient is taken too
        assert [n.name for n in nodes] == ["node-1"]
        close(client)


def test_load_api_client_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(KubeError, match=r"^Kubernetes API ConfigError: ") as caught:
        load_api_client(str(missing))
    assert str(missing) in str(caught.value)
    assert not os.path.exists(missing)


def test_error_messages_are_one_line_and_redacted() -> None:
    err = KubeError("bad\nthing: Authorization: Bearer abc.def.ghi", reason="Weird")
    assert str(err) == "Kubernetes API Weird: bad thing: Authorization: Bearer <redacted>"
    assert str(KubeError("x", status=422)) == "Kubernetes API 422 UnprocessableEntity: x"
    assert KubeAlreadyBound("m", node="n").node == "n"


def test_load_api_client_bad_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeError, match=r"^Kubernetes API ConfigError: "):
        load_api_client(str(bad))


def test_load_api_client_nothing_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(KubeError, match=r"^Kubernetes API ConfigError: ") as caught:
        load_api_client(None)
    assert "not in a cluster" in str(caught.value)
    assert str(tmp_path / "none") in str(caught.value)


# --- events -----------------------------------------------------------------------------


async def test_an_event_is_posted_once(api: FakeKubeAPI, kube: Make) -> None:
    event = PodEvent(NS, "p1", UID1, "Placed", "Binding", "placed on node-1", 1795872383.5, "x")
    client = kube(api)
    await client.create_event(event)
    (stored,) = api.events
    assert stored["eventTime"] == "2026-11-28T13:26:23.500000Z"
    path = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
    for code in (403, 503):  # best-effort: never retried
        api.fail_next(code)
        with pytest.raises(KubeError, match=rf"^Kubernetes API {code} "):
            await client.create_event(event)
    assert len(api.requests_to("POST", path)) == 3
    assert len(api.events) == 1


# --- evictions ----------------------------------------------------------------------------


def running(api: FakeKubeAPI, name: str, uid: str, node: str = "node-1") -> None:
    api.add_pod(NS, name, uid, node_name=node, phase="Running", owner=("ReplicaSet", "web-1"))


async def test_evict_sends_the_eviction_with_the_uid(api: FakeKubeAPI, kube: Make) -> None:
    running(api, "w2", UID2)
    await kube(api).evict(NS, "w2", UID2)
    (request,) = api.requests_to("POST", f"/api/v1/namespaces/{NS}/pods/w2/eviction")
    assert request.body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "w2", "namespace": NS},
        "deleteOptions": {"preconditions": {"uid": UID2}},
    }
    assert api.evictions == [(NS, "w2", UID2)]
    assert "deletionTimestamp" in api.pod(NS, "w2")["metadata"]  # type: ignore[index]
    await kube(api).evict(NS, "w2", "")  # no precondition: none sent; terminating: accepted
    assert api.evictions[-1] == (NS, "w2", "")
    assert "deleteOptions" not in api.requests[-1].body


async def test_evict_a_missing_pod_is_not_found(kube: Make, api: FakeKubeAPI) -> None:
    with pytest.raises(KubeError) as caught:
        await kube(api).evict(NS, "nope", UID1)
    assert (caught.value.status, caught.value.reason) == (404, "NotFound")
    assert not isinstance(caught.value, KubeEvictionRefused)
    assert caught.value.message == fixture("evict-pod-missing")["response"]["message"]


@pytest.mark.parametrize(
    ("scenario", "processed"),
    [("evict-pdb-blocked", True), ("evict-pdb-not-processed", False)],
)
async def test_evict_refused_by_a_budget_is_not_retried(
    scenario: str, processed: bool, api: FakeKubeAPI, kube: Make
) -> None:
    running(api, "w3", UID3)
    api.block_evictions(NS, "w3", "pdb-g", processed=processed)
    want = fixture(scenario)["response"]
    with pytest.raises(KubeEvictionRefused) as caught:
        await kube(api, retries=3).evict(NS, "w3", UID3)
    err = caught.value
    assert (err.status, err.reason) == (429, "TooManyRequests")
    assert err.causes == (want["details"]["causes"][0]["message"],)
    assert err.message.startswith(want["message"])
    assert "pdb-g" in str(err)
    assert err.details == want["details"]
    assert api.eviction_count(NS, "w3") == 1  # the caller waits for its next cycle
    assert "deletionTimestamp" not in api.pod(NS, "w3")["metadata"]  # type: ignore[index]


async def test_evict_a_recreated_pod_is_a_conflict(api: FakeKubeAPI, kube: Make) -> None:
    running(api, "w2", UID2)
    with pytest.raises(KubeError) as caught:
        await kube(api).evict(NS, "w2", OTHER_UID)
    assert (caught.value.status, caught.value.reason) == (409, "Conflict")
    assert f"UID in precondition: {OTHER_UID}" in str(caught.value)
    assert api.eviction_count(NS, "w2") == 1


async def test_evict_errors_and_retries(api: FakeKubeAPI, kube: Make) -> None:
    running(api, "w2", UID2)
    client = kube(api)
    api.fail_next(400)
    with pytest.raises(KubeError) as caught:
        await client.evict(NS, "w2", UID2)
    assert (caught.value.status, caught.value.reason) == (400, "BadRequest")
    api.fail_next(503)  # transient: retried
    await client.evict(NS, "w2", UID2)
    assert api.eviction_count(NS, "w2") == 3  # 400, then 503 and its retry
    api.fail_next(429)  # API throttling is refused too
    with pytest.raises(KubeEvictionRefused) as refused:
        await client.evict(NS, "w2", UID2)
    assert refused.value.causes == ()
    with pytest.raises(ValueError):
        await client.evict(NS, "", UID2)


# --- pod lists ----------------------------------------------------------------------------


async def test_list_pods_with_a_field_selector_follows_continue(
    api: FakeKubeAPI, kube: Make
) -> None:
    for i in range(7):
        api.add_pod("apps", f"r{i}", f"uid-{i}", node_name="node-1", phase="Running")
    api.add_pod("apps", "other", "uid-o", scheduler_name="default-scheduler", phase="Running")
    selector = "spec.schedulerName=decice_sched,status.phase=Running"
    client = kube(api)
    pods = [pod async for pod in client.list_pods(selector, limit=3)]
    assert [p["metadata"]["name"] for p in pods] == [f"r{i}" for i in range(7)]
    pages = api.requests_to("GET", "/api/v1/pods")
    assert [r.query for r in pages] == [
        {"limit": ["3"], "fieldSelector": [selector]},
        {"limit": ["3"], "continue": ["3"], "fieldSelector": [selector]},
        {"limit": ["3"], "continue": ["6"], "fieldSelector": [selector]},
    ]
    pending = [p async for p in client.list_pods("status.phase=Pending")]
    assert [p["metadata"]["name"] for p in pending] == ["p1", "p2", "p3"]
    everything = [p async for p in client.list_pods()]
    assert len(everything) == 11


async def test_list_pods_is_bounded_and_maps_errors(api: FakeKubeAPI, kube: Make) -> None:
    client = kube(api)
    with pytest.raises(KubeError) as caught:
        async for _ in client.list_pods(limit=1, max_pages=2):
            pass
    assert caught.value.reason == "TooManyPages"
    assert len(api.requests_to("GET", "/api/v1/pods")) == 2
    with pytest.raises(KubeError) as caught:
        async for _ in client.list_pods("spec.priority=1"):
            pass
    assert (caught.value.status, caught.value.reason) == (400, "BadRequest")
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 "):
        async for _ in client.list_pods():
            pass
    with pytest.raises(ValueError):
        async for _ in client.list_pods(max_pages=0):
            pass
