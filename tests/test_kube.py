"""extender.kube through the real `kubernetes` client against tests.kubeapi.FakeKubeAPI.

The first tests pin the fake server to the answers a real kube-apiserver gave
(fixtures/kube-apiserver/); the rest drive KubeClient through it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from extender.kube import (
    KubeAlreadyBound,
    KubeClient,
    KubeError,
    KubeUnavailable,
    load_api_client,
)
from extender.model import NodeInfo
from extender.pods import PodFacts
from tests.conftest import APISERVER
from tests.kubeapi import FakeKubeAPI, client_for, write_kubeconfig
from tests.loopback import free_port

NS = "decice"
UID1 = "73ab3ef1-e003-41ed-9126-19b3b3f3f049"
UID2 = "e63a0047-c806-4c7b-943d-7f05c8a7d03f"
UID3 = "5d83df66-a385-45af-8448-b5dbc1ebfb99"
BINDING_P1 = f"/api/v1/namespaces/{NS}/pods/p1/binding"


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


def kube(api_client: kubernetes.client.ApiClient, **kwargs: Any) -> KubeClient:
    options: dict[str, Any] = {"timeout": 0.3, "retries": 2, "backoff": 0.02}
    options.update(kwargs)
    return KubeClient(api_client, **options)


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


def test_bind_sends_the_binding_the_real_server_accepted(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    assert kube(api_client).bind(NS, "p1", UID1, "node-1") == "bound"
    (request,) = api.requests_to("POST", BINDING_P1)
    assert request.body == fixture("bind-ok")["request"]["body"]
    assert request.query == {}
    pod = api.pod(NS, "p1")
    assert pod is not None
    assert pod["spec"]["nodeName"] == "node-1"
    assert api.bind_count(NS, "p1") == 1


def test_bind_without_uid_sends_no_precondition(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 "):
        kube(api_client).bind(NS, "ghost", "", "node-1")
    (request,) = api.requests
    assert request.body == fixture("bind-pod-missing")["request"]["body"]


def test_bind_to_unknown_node_is_accepted_by_the_api(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    # Why the caller must check the node against what its filter passed.
    assert kube(api_client).bind(NS, "p2", UID2, "node-404") == "bound"


def test_second_bind_to_same_node_is_already_bound(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    client = kube(api_client)
    assert client.bind(NS, "p1", UID1, "node-1") == "bound"
    assert client.bind(NS, "p1", UID1, "node-1") == "already-bound"
    assert api.bind_count(NS, "p1") == 1
    assert len(api.requests_to("POST", BINDING_P1)) == 2


def test_bind_to_other_node_raises_already_bound(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    api.add_pod(NS, "p1", UID1, node_name="node-1")
    with pytest.raises(KubeAlreadyBound) as caught:
        kube(api_client).bind(NS, "p1", UID1, "node-2")
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


def test_uid_mismatch_is_conflict(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 409 ") as caught:
        kube(api_client).bind(NS, "p2", "00000000-0000-4000-8000-000000000000", "node-1")
    assert caught.value.status == 409
    assert "Precondition failed: UID in precondition" in caught.value.message
    assert api.bind_count(NS, "p2") == 0
    assert len(api.requests) == 1


def test_missing_pod_is_not_found(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 ") as caught:
        kube(api_client).bind(NS, "ghost", "a-uid", "node-1")
    assert str(caught.value) == 'Kubernetes API 404 NotFound: pods "ghost" not found'
    assert len(api.requests) == 1


def test_forbidden(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        kube(api_client).bind(NS, "p3", UID3, "node-1")
    assert str(caught.value) == (
        'Kubernetes API 403 Forbidden: pods "p3" is forbidden: User '
        '"system:serviceaccount:decice:nobody" cannot create resource "pods/binding" in API '
        'group "" in the namespace "decice"'
    )
    assert len(api.requests) == 1
    assert api.bind_count(NS, "p3") == 0


def test_unauthorized_never_shows_the_token() -> None:
    with FakeKubeAPI(token="right-token") as server:
        server.add_pod(NS, "p3", UID3)
        client = client_for(server, token="s3cr3t-wrong-token")
        with pytest.raises(KubeError, match=r"^Kubernetes API 401 ") as caught:
            kube(client).bind(NS, "p3", UID3, "node-1")
        close(client)
        assert len(server.requests) == 1
        assert server.requests[0].headers["authorization"] == "Bearer s3cr3t-wrong-token"
    err = caught.value
    assert (err.status, err.reason) == (401, "Unauthorized")
    assert str(err) == "Kubernetes API 401 Unauthorized: Unauthorized"
    assert "s3cr3t" not in str(err) and "s3cr3t" not in repr(err)


def test_right_token_binds() -> None:
    with FakeKubeAPI(token="right-token") as server:
        server.add_pod(NS, "p3", UID3)
        client = client_for(server)
        assert kube(client).bind(NS, "p3", UID3, "node-1") == "bound"
        close(client)


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
def test_transient_answer_is_retried_once(
    code: int, api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    api.fail_next(code)
    assert kube(api_client).bind(NS, "p1", UID1, "node-1") == "bound"
    assert len(api.requests_to("POST", BINDING_P1)) == 2
    assert api.bind_count(NS, "p1") == 1


@pytest.mark.parametrize("retries", [0, 2])
def test_persistent_500_gives_up(
    retries: int, api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    api.fail_next(500, times=10)
    with pytest.raises(KubeUnavailable) as caught:
        kube(api_client, retries=retries).bind(NS, "p1", UID1, "node-1")
    assert len(api.requests) == retries + 1
    err = caught.value
    assert (err.status, err.reason) == (500, "InternalError")
    assert f"gave up after {retries + 1} attempts" in str(err)
    assert str(err).startswith("Kubernetes API 500 InternalError: POST ")
    assert api.bind_count(NS, "p1") == 0


def test_backoff_grows(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    api.fail_next(503, times=3)
    started = time.monotonic()
    with pytest.raises(KubeUnavailable):
        kube(api_client, retries=2, backoff=0.1).bind(NS, "p1", UID1, "node-1")
    assert time.monotonic() - started >= 0.1 + 0.2


def test_slow_answer_is_retried(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    # The first request stalls before it takes effect; the retry binds.
    api.delay_next(1.0)
    assert kube(api_client).bind(NS, "p1", UID1, "node-1") == "bound"
    assert len(api.requests_to("POST", BINDING_P1)) == 2
    api.release_delays()
    assert api.wait_idle()
    assert api.bind_count(NS, "p1") == 1  # the stalled first request found it bound


def test_lost_answer_then_retry_is_already_bound(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    # The first bind takes effect but its answer comes too late: the retry gets a 409
    # naming the node we asked for, which is success.
    api.delay_next(1.0, after=True)
    assert kube(api_client).bind(NS, "p1", UID1, "node-1") == "already-bound"
    api.release_delays()
    assert api.wait_idle()
    assert api.bind_count(NS, "p1") == 1
    assert len(api.requests_to("POST", BINDING_P1)) == 2


def test_always_slow_gives_up(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    api.delay_next(2.0, times=5)
    started = time.monotonic()
    with pytest.raises(KubeUnavailable) as caught:
        kube(api_client, timeout=0.2, retries=1).bind(NS, "p1", UID1, "node-1")
    # gave up on its own timeouts: it never waited for the server's 2 s answer
    assert time.monotonic() - started < 2.0
    err = caught.value
    assert err.status is None and err.reason == "Timeout"
    assert "gave up after 2 attempts" in str(err)
    assert len(api.requests) == 2
    api.release_delays()
    assert api.wait_idle()
    assert api.bind_count(NS, "p1") == 1  # the stalled requests did bind, once


def test_connection_refused_is_unavailable() -> None:
    configuration = kubernetes.client.Configuration(host=f"http://127.0.0.1:{free_port()}")
    configuration.retries = False
    client = kubernetes.client.ApiClient(configuration)
    with pytest.raises(KubeUnavailable) as caught:
        kube(client, retries=2).bind(NS, "p1", UID1, "node-1")
    close(client)
    err = caught.value
    assert err.status is None and err.reason == "Unreachable"
    assert "gave up after 3 attempts" in str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize(
    ("namespace", "name", "node"),
    [("", "p1", "node-1"), (NS, "", "node-1"), (NS, "p1", "")],
)
def test_bind_refuses_empty_arguments_before_any_request(
    namespace: str,
    name: str,
    node: str,
    api: FakeKubeAPI,
    api_client: kubernetes.client.ApiClient,
) -> None:
    with pytest.raises(ValueError):
        kube(api_client).bind(namespace, name, UID1, node)
    assert api.requests == []


# --- reads ----------------------------------------------------------------------------------


def test_get_pod(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    client = kube(api_client)
    assert client.get_pod(NS, "p1") == PodFacts(
        namespace=NS,
        name="p1",
        uid=UID1,
        scheduler_name="decice_sched",
        cpu_request=0.5,
        node_name="",
    )
    client.bind(NS, "p1", UID1, "node-2")
    assert client.get_pod(NS, "p1").node_name == "node-2"


def test_get_pod_cpu_sums_containers(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    api.add_pod(NS, "multi", "u-multi", cpu_request=["250m", None, "1"])
    api.add_pod(NS, "none", "u-none", cpu_request=None, scheduler_name="default-scheduler")
    client = kube(api_client)
    assert client.get_pod(NS, "multi").cpu_request == pytest.approx(1.25)
    none = client.get_pod(NS, "none")
    assert none.cpu_request is None
    assert none.scheduler_name == "default-scheduler"


def test_get_pod_errors(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    client = kube(api_client)
    with pytest.raises(KubeError, match=r"^Kubernetes API 404 "):
        client.get_pod(NS, "ghost")
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        client.get_pod(NS, "p1")
    assert 'cannot get resource "pods"' in str(caught.value)
    api.fail_next(503)
    assert client.get_pod(NS, "p1").uid == UID1


def test_list_nodes(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    api.add_node("node-3", ["10.0.0.3", "fd00::3"], cpu=None)
    api.add_node("node-4", None, cpu="16")
    assert kube(api_client).list_nodes() == [
        NodeInfo(name="node-1", internal_ips=("10.0.0.1",), cpu_cores=4.0),
        NodeInfo(name="node-2", internal_ips=("10.0.0.2",), cpu_cores=3.5),
        NodeInfo(name="node-3", internal_ips=("10.0.0.3", "fd00::3"), cpu_cores=None),
        NodeInfo(name="node-4", internal_ips=(), cpu_cores=16.0),
    ]


def test_list_nodes_follows_continue(
    api: FakeKubeAPI, api_client: kubernetes.client.ApiClient
) -> None:
    for i in range(3, 602):
        api.add_node(f"node-{i:04d}", f"10.1.{i // 256}.{i % 256}")
    api.fail_next(503)  # the first page is retried
    nodes = kube(api_client).list_nodes()
    assert len(nodes) == 601
    assert len({n.name for n in nodes}) == 601
    pages = api.requests_to("GET", "/api/v1/nodes")
    assert len(pages) == 3
    assert pages[1].query == {"limit": ["500"]}
    assert pages[2].query == {"limit": ["500"], "continue": ["500"]}


def test_list_nodes_forbidden(api: FakeKubeAPI, api_client: kubernetes.client.ApiClient) -> None:
    api.fail_next(403)
    with pytest.raises(KubeError, match=r"^Kubernetes API 403 ") as caught:
        kube(api_client).list_nodes()
    assert 'cannot list resource "nodes"' in str(caught.value)


# --- setup and errors -------------------------------------------------------------------------


def test_load_api_client_from_kubeconfig(tmp_path: Path) -> None:
    default_host = kubernetes.client.Configuration.get_default_copy().host
    with FakeKubeAPI(token="kc-token") as server:
        server.add_pod(NS, "p1", UID1)
        client = load_api_client(str(write_kubeconfig(tmp_path / "kc", server.url, "kc-token")))
        assert kube(client).bind(NS, "p1", UID1, "node-1") == "bound"
        close(client)
    assert kubernetes.client.Configuration.get_default_copy().host == default_host


def test_load_api_client_defaultwrite_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with FakeKubeAPI(token="kc-token") as server:
        server.add_node("node-1", "10.0.0.1")
        kubeconfig = write_kubeconfig(tmp_path / "kc", server.url, "kc-token")
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        client = load_api_client(None)
        assert [n.name for n in kube(client).list_nodes()] == ["node-1"]
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


def test_load_api_client_badwrite_kubeconfig(tmp_path: Path) -> None:
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
