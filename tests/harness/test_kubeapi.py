"""tests.harness.kubeapi.FakeKubeAPI against the answers of a real kube-apiserver
(fixtures/kube-apiserver/): lists, watch streams, pod and node patches, evictions judged
by PodDisruptionBudgets, Events and the lifecycle helpers.

Lists and patches go through the real `kubernetes` client; watch streams are read with
http.client, one line per event, so the chunked framing itself is under test. Every read
is bounded by the socket timeout; no test sleeps to wait.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import kubernetes.client
import kubernetes.watch
import pytest

from tests.harness.fixtures import APISERVER
from tests.harness.kubeapi import (
    DEFAULT_USER,
    TEST_BUDGET_LABEL,
    WATCH_CONTENT_TYPE,
    FakeKubeAPI,
    client_for,
    label_selector_matches,
)
from tests.harness.loopback import wait_until

JSON = dict[str, Any]
NS = "decice"
UID = "9be4b3aa-7061-4b8b-8047-79d6553cfd23"  # w2's in the patch fixtures
OTHER_UID = "00000000-0000-4000-8000-000000000000"  # the wrong one of patch-uid-mismatch
READ_TIMEOUT = 30.0  # a ceiling for a stuck read, not a wait
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
Watch: Any = kubernetes.watch.Watch  # unannotated in the kubernetes package


def fixture(name: str) -> JSON:
    doc: JSON = json.loads((APISERVER / f"{name}.json").read_text())
    return doc


def fixture_events() -> list[JSON]:
    events: list[JSON] = fixture("watch-pods")["events"]
    return events


def without(doc: JSON, *keys: str) -> set[str]:
    return set(doc) - set(keys)


def recent(timestamp: str) -> bool:
    """An RFC 3339 seconds timestamp within a minute of now."""
    assert RFC3339.match(timestamp), timestamp
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return abs((datetime.now(UTC) - then).total_seconds()) < 60


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


@pytest.fixture
def core(api: FakeKubeAPI) -> Iterator[kubernetes.client.CoreV1Api]:
    client = client_for(api)
    yield kubernetes.client.CoreV1Api(client)
    closer: Callable[[], None] = client.close  # unannotated in the kubernetes package
    closer()


def call(method: Any, *args: Any, **kwargs: Any) -> tuple[int, JSON]:
    """A CoreV1Api method called with _preload_content=False: status and JSON answer."""
    try:
        response = method(*args, _preload_content=False, **kwargs)
    except kubernetes.client.ApiException as error:
        failure: JSON = json.loads(str(error.body))
        return error.status, failure
    answer: JSON = json.loads(response.data)
    return response.status, answer


def connect(api: FakeKubeAPI) -> http.client.HTTPConnection:
    parts = urlsplit(api.url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=READ_TIMEOUT)


@contextlib.contextmanager
def watch(api: FakeKubeAPI, resource: str, **params: str) -> Iterator[http.client.HTTPResponse]:
    """GET /api/v1/{resource}?watch=true&...; the response, its body unread."""
    conn = connect(api)
    try:
        conn.request("GET", f"/api/v1/{resource}?" + urlencode({"watch": "true", **params}))
        yield conn.getresponse()
    finally:
        conn.close()


def next_event(response: http.client.HTTPResponse) -> JSON:
    line = response.readline()
    assert line.endswith(b"\n"), f"the stream ended: {line!r}"
    event: JSON = json.loads(line)
    return event


def rest_of(response: http.client.HTTPResponse) -> list[JSON]:
    """The events up to the end of the stream; IncompleteRead if it was cut."""
    return [json.loads(line) for line in response.read().splitlines()]


def request(
    api: FakeKubeAPI, method: str, path: str, body: Any, content_type: str
) -> tuple[int, JSON]:
    conn = connect(api)
    try:
        conn.request(method, path, json.dumps(body), {"Content-Type": content_type})
        response = conn.getresponse()
        answer: JSON = json.loads(response.read())
        return response.status, answer
    finally:
        conn.close()


def patch(
    core: kubernetes.client.CoreV1Api, name: str, body: JSON, content_type: str | None = None
) -> tuple[int, JSON]:
    """PATCH through the real client (its default for a dict is a strategic merge patch)."""
    extra = {} if content_type is None else {"_content_type": content_type}
    return call(core.patch_namespaced_pod, name, NS, body, **extra)


# --- lists ------------------------------------------------------------------------------------


def test_pod_list_is_shaped_like_the_fixture(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    want = fixture("list-pods-limit-1")["response"]
    _, empty = call(core.list_pod_for_all_namespaces, limit=1)
    assert set(empty) == set(want)
    assert set(empty["metadata"]) == set(want["metadata"])  # no continue on the last page
    assert (empty["kind"], empty["apiVersion"], empty["items"]) == ("PodList", "v1", [])
    assert empty["metadata"]["resourceVersion"] == api.resource_version

    for namespace, name in [("b", "p1"), (NS, "w2"), (NS, "w1")]:
        api.add_pod(namespace, name, f"uid-{name}")
    paged = fixture("list-nodes-limit-1")["response"]  # a page with more to come
    _, first = call(core.list_pod_for_all_namespaces, limit=1)
    assert set(first["metadata"]) == set(paged["metadata"])
    assert first["metadata"]["remainingItemCount"] == 2
    assert first["metadata"]["resourceVersion"] == api.resource_version
    # list items carry no kind / apiVersion, as the real server's node list shows
    assert set(first["items"][0]) == set(paged["items"][0]) == {"metadata", "spec", "status"}

    names: list[tuple[str, str]] = []
    token = None
    for _ in range(4):  # three pages, then a check there is no fourth
        _, page = call(core.list_pod_for_all_namespaces, limit=1, _continue=token)
        names += [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in page["items"]]
        token = page["metadata"].get("continue")
        if token is None:
            break
    assert names == [("b", "p1"), (NS, "w1"), (NS, "w2")]
    assert api.pod(NS, "w1")["kind"] == "Pod"  # type: ignore[index]  # stored with its kind


def test_node_list_is_shaped_like_the_fixture(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    for i in (1, 2, 3):
        api.add_node(f"node-{i}", f"10.0.0.{i}")
    want = fixture("list-nodes-limit-1")["response"]
    _, got = call(core.list_node, limit=1)
    assert set(got) == set(want)
    assert set(got["metadata"]) == set(want["metadata"])
    assert got["metadata"]["remainingItemCount"] == want["metadata"]["remainingItemCount"] == 2
    (item,) = got["items"]
    (want_item,) = want["items"]
    assert set(item) == set(want_item)
    assert set(item["metadata"]) == without(want_item["metadata"], "managedFields")


# --- watch ------------------------------------------------------------------------------------


def test_watch_replays_the_history_then_streams_new_changes(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    since = api.resource_version
    api.add_pod(NS, "w1", "uid-w1", cpu_request="250m")
    api.assign(NS, "w1", "node-1")
    assert patch(core, "w1", {"metadata": {"annotations": {"x": "1"}}})[0] == 200
    api.delete_pod(NS, "w1")  # not graceful: deletionTimestamp (MODIFIED), then DELETED
    want = [e for e in fixture_events() if e["type"] != "BOOKMARK"]

    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        assert response.status == 200
        got = [next_event(response) for _ in want]
        assert [e["type"] for e in got] == [e["type"] for e in want]
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
        assert versions == sorted(versions) and versions[0] > int(since)
        assert versions[-1] == int(api.resource_version)
        for mine, real in zip(got, want, strict=True):
            assert set(mine) == set(real)
            assert set(mine["object"]) == set(real["object"])
            assert (mine["object"]["kind"], mine["object"]["apiVersion"]) == ("Pod", "v1")
            meta, real_meta = mine["object"]["metadata"], real["object"]["metadata"]
            assert set(meta) == without(real_meta, "managedFields", "labels")
            assert meta["generation"] == real_meta["generation"]
            assert meta.get("deletionGracePeriodSeconds") == real_meta.get(
                "deletionGracePeriodSeconds"
            )
            assert meta.get("annotations") == real_meta.get("annotations")
            assert mine["object"]["spec"].get("nodeName") == real["object"]["spec"].get("nodeName")
            status, real_status = mine["object"]["status"], real["object"]["status"]
            assert list(status) == list(real_status)  # phase, conditions, qosClass
            for condition, real_condition in zip(
                status.get("conditions", []), real_status.get("conditions", []), strict=True
            ):
                assert condition.pop("lastTransitionTime") is not None
                real_condition = dict(real_condition)
                del real_condition["lastTransitionTime"]
                assert condition == real_condition

        api.add_pod(NS, "w2", UID)  # now live
        live = next_event(response)
        assert live["type"] == "ADDED"
        assert live["object"]["metadata"]["name"] == "w2"
        assert live["object"]["metadata"]["resourceVersion"] == api.resource_version
        assert api.open_watches("pods") == 1
        assert api.open_watches("nodes") == 0


def test_bookmarks_are_shaped_like_the_fixture() -> None:
    (real,) = [e for e in fixture_events() if e["type"] == "BOOKMARK"]
    with FakeKubeAPI(bookmark_interval=0.05) as api:
        api.add_pod(NS, "w1", "uid-w1")
        with watch(
            api, "pods", resourceVersion=api.resource_version, allowWatchBookmarks="true"
        ) as response:
            bookmark = next_event(response)
        real["object"]["metadata"]["resourceVersion"] = api.resource_version
        assert bookmark == real  # exactly, but for the version

        api.add_node("node-1", "10.0.0.1")
        with watch(api, "nodes", allowWatchBookmarks="true") as response:
            bookmark = next_event(response)
        assert bookmark["type"] == "BOOKMARK"
        assert set(bookmark["object"]) == set(real["object"])
        assert bookmark["object"]["kind"] == "Node"
        assert bookmark["object"]["metadata"] == {"resourceVersion": api.resource_version}


def test_timeout_ends_the_stream_cleanly_and_without_bookmarks_unless_asked() -> None:
    with FakeKubeAPI(bookmark_interval=0.05) as api:
        started = time.monotonic()  # before the request: the server's clock starts later
        with watch(api, "pods", resourceVersion=api.resource_version, timeoutSeconds="1") as r:
            assert r.status == 200
            assert r.getheader("Content-Type") == fixture("watch-pods")["content_type"]
            assert r.getheader("Content-Type") == WATCH_CONTENT_TYPE
            assert r.getheader("Transfer-Encoding") == "chunked"
            assert r.getheader("Content-Length") is None
            assert rest_of(r) == []  # no bookmark; the terminating chunk: no IncompleteRead
        assert time.monotonic() - started >= 1.0  # ended by the server's timeout
        wait_until(lambda: api.open_watches("pods") == 0, 10, "the stream was closed")


def test_an_expired_resource_version_gets_the_410_error_event(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    old = api.resource_version
    api.add_pod(NS, "w1", "uid-w1")
    api.expire_history()
    with watch(api, "pods", resourceVersion=old, timeoutSeconds="30") as response:
        assert response.status == 200
        events = rest_of(response)  # one event, then the stream ends at once
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({api.resource_version})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]
    assert api.open_watches("pods") == 0
    # the kubernetes client turns it into an ApiException 410 (it retries only without a
    # timeout)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        for _ in Watch().stream(
            core.list_pod_for_all_namespaces, resource_version=old, timeout_seconds=5
        ):
            pass
    assert caught.value.status == 410
    # from the current version the watch goes on as usual
    with watch(api, "pods", resourceVersion=api.resource_version) as response:
        api.add_pod(NS, "w2", UID)
        assert next_event(response)["type"] == "ADDED"


def test_the_history_keeps_the_newest_changes() -> None:
    with FakeKubeAPI(history=2) as api:
        before = api.resource_version
        for name in ("a", "b", "c"):
            api.add_pod(NS, name, f"uid-{name}")
        first = str(int(before) + 1)  # the version of "a": its change was dropped
        with watch(api, "pods", resourceVersion=first, timeoutSeconds="30") as response:
            replayed = [next_event(response)["object"]["metadata"]["name"] for _ in "bc"]
        assert replayed == ["b", "c"]
        with watch(api, "pods", resourceVersion=before, timeoutSeconds="30") as response:
            (error,) = rest_of(response)
        assert error["type"] == "ERROR"
        assert error["object"]["message"] == f"too old resource version: {before} ({first})"


def test_break_watches_cuts_every_open_stream(api: FakeKubeAPI) -> None:
    with watch(api, "pods", timeoutSeconds="30") as pods, watch(api, "nodes") as nodes:
        wait_until(
            lambda: api.open_watches("pods") == api.open_watches("nodes") == 1,
            10,
            "both watches are open",
        )
        api.break_watches()
        for response in (pods, nodes):
            with pytest.raises(http.client.IncompleteRead):
                response.read()  # no terminating chunk: a broken stream, not an end
    wait_until(lambda: api.open_watches("pods") == 0, 10, "the cut stream was dropped")


def test_go_away_refuses_connections_and_come_back_keeps_the_port_and_state(
    api: FakeKubeAPI,
) -> None:
    api.add_pod(NS, "w1", UID)
    url = api.url
    port = urlsplit(url).port
    assert port is not None
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=5)  # keep-alive
    kept.request("GET", f"/api/v1/namespaces/{NS}/pods/w1")
    assert kept.getresponse().read()
    with watch(api, "pods", timeoutSeconds="30") as response:
        wait_until(lambda: api.open_watches("pods") == 1, 10, "the watch is open")
        api.go_away()
        with pytest.raises(http.client.IncompleteRead):
            response.read()
    with pytest.raises((http.client.HTTPException, OSError)):  # cut, not served on
        kept.request("GET", f"/api/v1/namespaces/{NS}/pods/w1")
        kept.getresponse().read()
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=5).request("GET", "/api/v1/pods")
    api.come_back()
    assert api.url == url
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.request("GET", f"/api/v1/namespaces/{NS}/pods/w1")
    answer = connection.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["metadata"]["uid"] == UID


def test_stop_ends_open_streams() -> None:
    api = FakeKubeAPI().start()
    try:
        with watch(api, "pods", timeoutSeconds="60") as response:
            wait_until(lambda: api.open_watches("pods") == 1, 10, "the watch is open")
            started = time.monotonic()
            api.stop()
            assert time.monotonic() - started < 30  # did not wait for the 60 s timeout
            wait_until(lambda: api.open_watches("pods") == 0, 10, "the stream was let go")
            assert rest_of(response) == []
    finally:
        api.stop()


def test_an_injected_403_names_the_watch_at_the_cluster_scope(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    for resource in ("pods", "nodes"):
        api.fail_next(403, watch=True)
        with watch(api, resource, resourceVersion="0") as response:
            assert response.status == 403
            body = json.loads(response.read())
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'{resource} is forbidden: User "{DEFAULT_USER}" cannot watch resource '
            f'"{resource}" in API group "" at the cluster scope',
            "reason": "Forbidden",
            "details": {"kind": resource},
            "code": 403,
        }
    api.fail_next(403)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.list_pod_for_all_namespaces(limit=1)
    assert caught.value.status == 403
    message = json.loads(str(caught.value.body))["message"]
    assert message.endswith('cannot list resource "pods" in API group "" at the cluster scope')
    assert api.open_watches("pods") == 0


def test_the_kubernetes_client_reads_the_stream(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    since = api.resource_version
    api.add_pod(NS, "w1", "uid-w1")
    api.assign(NS, "w1", "node-1")
    events = list(
        Watch().stream(core.list_pod_for_all_namespaces, resource_version=since, timeout_seconds=1)
    )
    assert [(e["type"], e["object"].spec.node_name) for e in events] == [
        ("ADDED", None),
        ("MODIFIED", "node-1"),
    ]


# --- patch ------------------------------------------------------------------------------------


def test_merge_and_strategic_patches_answer_like_the_fixtures(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w2", UID, cpu_request="250m")
    since = api.resource_version
    want = fixture("patch-annotation-ok")["response"]
    code, pod = patch(
        core,
        "w2",
        {
            "metadata": {
                "uid": UID,
                "labels": {"app": "w"},
                "annotations": {"decice.io/metrics-recovered": "1700000000"},
            }
        },
        "application/merge-patch+json",
    )
    assert code == 200
    assert list(pod) == list(want)
    assert list(pod["metadata"]) == [k for k in want["metadata"] if k != "managedFields"]
    assert pod["metadata"]["annotations"] == want["metadata"]["annotations"]
    assert pod["metadata"]["labels"] == want["metadata"]["labels"]
    assert set(pod["spec"]) <= set(want["spec"])
    assert pod["status"] == want["status"]
    assert pod["metadata"]["resourceVersion"] == api.resource_version != since
    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        assert next_event(response) == {"type": "MODIFIED", "object": pod}

    strategic = fixture("patch-strategic-ok")["response"]
    code, pod = patch(core, "w2", {"metadata": {"annotations": {"a": "b"}}})  # strategic
    assert code == 200
    assert pod["metadata"]["annotations"] == strategic["metadata"]["annotations"]
    assert api.requests[-1].headers["content-type"] == "application/strategic-merge-patch+json"

    code, pod = patch(core, "w2", {"metadata": {"annotations": {"a": None}}})
    assert pod["metadata"]["annotations"] == {"decice.io/metrics-recovered": "1700000000"}
    version = pod["metadata"]["resourceVersion"]
    code, pod = patch(core, "w2", {"metadata": {"annotations": {"a": None}}})  # a no-op
    assert (code, pod["metadata"]["resourceVersion"]) == (200, version)
    code, pod = patch(core, "w2", {"metadata": {"annotations": None}})
    assert "annotations" not in pod["metadata"]


def test_a_patch_with_another_uid_is_refused_with_the_fixture_422(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w2", UID)
    version = api.resource_version
    body = {"metadata": {"uid": OTHER_UID, "annotations": {"x": "1"}}}
    code, answer = patch(core, "w2", body, "application/merge-patch+json")
    want = fixture("patch-uid-mismatch")
    assert (code, answer) == (want["status"], want["response"])
    assert api.resource_version == version
    assert "annotations" not in api.pod(NS, "w2")["metadata"]  # type: ignore[index]


def test_a_patch_of_a_missing_pod_is_the_fixture_404(core: kubernetes.client.CoreV1Api) -> None:
    want = fixture("patch-pod-missing")
    code, answer = patch(core, "nope", {"metadata": {"annotations": {"x": "1"}}})
    assert (code, answer) == (want["status"], want["response"])


@pytest.mark.parametrize("content_type", ["application/json", "application/json-patch+json"])
def test_a_patch_of_another_media_type_is_415(api: FakeKubeAPI, content_type: str) -> None:
    api.add_pod(NS, "w2", UID)
    code, answer = request(
        api, "PATCH", f"/api/v1/namespaces/{NS}/pods/w2", {"metadata": {}}, content_type
    )
    assert (code, answer) == (
        415,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the body of the request was in an unknown format - accepted media "
            "types include: application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml, application/strategic-merge-patch+json",
            "reason": "UnsupportedMediaType",
            "code": 415,
        },
    )


def test_an_injected_403_on_a_patch_names_the_verb_and_namespace(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w2", UID)
    api.fail_next(403)
    code, answer = patch(core, "w2", {"metadata": {"annotations": {"x": "1"}}})
    assert code == 403
    assert answer["message"] == (
        f'pods "w2" is forbidden: User "{DEFAULT_USER}" cannot patch resource "pods" in API '
        f'group "" in the namespace "{NS}"'
    )


# --- lifecycle helpers ------------------------------------------------------------------------


def test_pod_lifecycle_helpers_record_what_the_real_server_sends(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w1", "uid-w1")
    api.add_pod(NS, "w2", UID)
    since = api.resource_version
    api.assign(NS, "w1", "node-1")
    assert api.bind_count(NS, "w1") == 0 and api.requests == []
    with pytest.raises(ValueError, match="bound"):
        api.assign(NS, "w1", "node-2")
    binding = {"metadata": {"name": "w2", "uid": UID}, "target": {"name": "node-2"}}
    assert call(core.create_namespaced_pod_binding, "w2", NS, binding)[0] == 201
    api.set_phase(NS, "w1", "Running")
    api.delete_pod(NS, "w1", graceful=True)
    assert api.pod(NS, "w1") is not None
    api.delete_pod(NS, "w1")
    assert api.pod(NS, "w1") is None

    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        events = [next_event(response) for _ in range(5)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "w1"),  # assign
        ("MODIFIED", "w2"),  # POST binding
        ("MODIFIED", "w1"),  # Running
        ("MODIFIED", "w1"),  # graceful delete
        ("DELETED", "w1"),
    ]
    for bound in events[:2]:
        (condition,) = bound["object"]["status"]["conditions"]
        assert recent(condition["lastTransitionTime"])
        assert list(condition) == ["type", "status", "lastProbeTime", "lastTransitionTime"]
    assert api.bind_count(NS, "w2") == 1
    assert events[2]["object"]["status"]["phase"] == "Running"
    marked = events[3]["object"]["metadata"]
    assert recent(marked["deletionTimestamp"])
    assert (marked["deletionGracePeriodSeconds"], marked["generation"]) == (30, 2)
    assert events[4]["object"]["metadata"]["deletionTimestamp"] == marked["deletionTimestamp"]
    with pytest.raises(ValueError, match="phase"):
        api.set_phase(NS, "w2", "Sleeping")
    with pytest.raises(KeyError):
        api.delete_pod(NS, "w1")


def test_node_changes_are_watched_with_kind_node(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    since = api.resource_version
    api.add_node("node-1", "10.0.0.1", cpu="4")
    api.update_node("node-1", cpu="8", internal_ip="10.0.0.9")
    (listed,) = call(core.list_node)[1]["items"]
    assert listed["status"]["capacity"]["cpu"] == "8"
    assert "kind" not in listed
    api.remove_node("node-1")
    with watch(api, "nodes", resourceVersion=since, timeoutSeconds="30") as response:
        events = [next_event(response) for _ in range(3)]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    for event in events:
        assert list(event["object"])[:2] == ["kind", "apiVersion"]
        assert (event["object"]["kind"], event["object"]["apiVersion"]) == ("Node", "v1")
        assert set(event["object"]) == {"kind", "apiVersion", "metadata", "spec", "status"}
    modified = events[1]["object"]["status"]
    assert modified["allocatable"]["cpu"] == modified["capacity"]["cpu"] == "8"
    assert modified["addresses"][0] == {"type": "InternalIP", "address": "10.0.0.9"}
    assert events[2]["object"]["metadata"]["resourceVersion"] == api.resource_version
    assert call(core.list_node)[1]["items"] == []


# --- access reviews ---------------------------------------------------------------------------


def _shape(doc: Any) -> Any:
    """The keys of `doc`, nested; lists by their first item; leaves by their type."""
    if isinstance(doc, dict):
        return {key: _shape(value) for key, value in doc.items()}
    if isinstance(doc, list):
        return [_shape(doc[0])] if doc else []
    return type(doc).__name__


def test_an_access_review_is_answered_like_the_fixture(api: FakeKubeAPI) -> None:
    captured = fixture("selfsubjectaccessreview")
    path = captured["request"].split(" ", 1)[1]
    want = captured["response"]
    sent = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": want["spec"],
    }
    status, got = request(api, "POST", path, sent, "application/json")
    assert status == captured["status"] == 201
    assert _shape(got) == _shape(want)
    assert got["spec"] == want["spec"]
    assert got["status"] == want["status"] == {"allowed": True}
    fields = got["metadata"]["managedFields"][0]
    assert fields["fieldsV1"] == want["metadata"]["managedFields"][0]["fieldsV1"]
    assert recent(fields["time"])


def test_a_denied_access_review_answers_not_allowed(api: FakeKubeAPI) -> None:
    api.deny("create", "pods/binding")
    api.deny("create", "events", group="events.k8s.io")
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

    def allowed(**attributes: str) -> bool:
        sent = {"spec": {"resourceAttributes": attributes}}
        status, got = request(api, "POST", path, sent, "application/json")
        assert status == 201
        answer: bool = got["status"]["allowed"]
        return answer

    assert not allowed(verb="create", resource="pods", subresource="binding")
    assert allowed(verb="create", resource="pods")
    assert not allowed(verb="create", group="events.k8s.io", resource="events")
    assert allowed(verb="create", resource="events")
    status, got = request(api, "POST", path, {"spec": {}}, "application/json")
    assert (status, got["reason"]) == (422, "Invalid")


# --- evictions --------------------------------------------------------------------------------

EVICTION_PATH = f"/api/v1/namespaces/{NS}/pods/{{}}/eviction"


def eviction(name: str, uid: str | None = None, namespace: str = NS) -> JSON:
    """A policy/v1 Eviction, as the extender sends it."""
    body: JSON = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid is not None:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    return body


def evict(core: kubernetes.client.CoreV1Api, url_name: str, body: JSON) -> tuple[int, JSON]:
    return call(core.create_namespaced_pod_eviction, url_name, NS, body)


def running(api: FakeKubeAPI, name: str, uid: str = UID, node: str = "node-1") -> JSON:
    return api.add_pod(
        NS, name, uid, node_name=node, phase="Running", owner=("ReplicaSet", "web-5d4f8")
    )


def test_an_eviction_is_answered_like_evict_ok_and_marks_the_pod(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w2")
    since = api.resource_version
    want = fixture("evict-ok")
    assert want["request"] == f"POST {EVICTION_PATH.format('w2')}"
    assert evict(core, "w2", eviction("w2", UID)) == (want["status"], want["response"])
    assert api.evictions == [(NS, "w2", UID)]
    pod = api.pod(NS, "w2")
    assert pod is not None  # Terminating: it stays until its kubelet confirms
    assert recent(pod["metadata"]["deletionTimestamp"])
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        event = next_event(response)
    assert event["type"] == "MODIFIED"
    assert event["object"]["metadata"]["deletionTimestamp"] == pod["metadata"]["deletionTimestamp"]
    # evicting it again (a retry whose first answer was lost) is accepted, and changes nothing
    version = api.resource_version
    assert evict(core, "w2", eviction("w2", UID)) == (201, want["response"])
    assert api.resource_version == version
    assert api.eviction_count(NS, "w2") == 2


def test_a_pending_pod_is_deleted_at_once_and_skips_its_budget(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w3", UID)  # Pending, on no node
    api.block_evictions(NS, "w3")
    since = api.resource_version
    assert evict(core, "w3", eviction("w3"))[0] == 201
    assert api.pod(NS, "w3") is None
    assert api.evictions == [(NS, "w3", "")]
    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        events = [next_event(response) for _ in range(2)]
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert events[0]["object"]["metadata"]["deletionGracePeriodSeconds"] == 0


def test_evicting_a_missing_pod_is_the_fixture_404(core: kubernetes.client.CoreV1Api) -> None:
    want = fixture("evict-pod-missing")
    assert evict(core, "nope", eviction("nope")) == (want["status"], want["response"])


def test_an_eviction_naming_another_pod_is_the_fixture_400(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w3")
    want = fixture("evict-bad-body")
    assert evict(core, "w3", eviction("w2")) == (want["status"], want["response"])
    assert "deletionTimestamp" not in api.pod(NS, "w3")["metadata"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("scenario", "processed"),
    [("evict-pdb-blocked", True), ("evict-pdb-not-processed", False)],
)
def test_a_budget_refuses_like_the_fixtures(
    scenario: str, processed: bool, api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w3")
    api.block_evictions(NS, "w3", processed=processed)
    want = fixture(scenario)
    assert evict(core, "w3", eviction("w3", UID)) == (want["status"], want["response"])
    assert "deletionTimestamp" not in api.pod(NS, "w3")["metadata"]  # type: ignore[index]

    api.block_evictions(NS, "w3", "web-budget", processed=processed)  # named in the cause
    code, answer = evict(core, "w3", eviction("w3", UID))
    (cause,) = answer["details"]["causes"]
    assert code == 429
    assert cause["message"] == want["response"]["details"]["causes"][0]["message"].replace(
        "pdb-g", "web-budget"
    )
    api.allow_evictions(NS, "w3")
    assert evict(core, "w3", eviction("w3", UID))[0] == 201
    assert api.eviction_count(NS, "w3") == 3


def test_an_eviction_with_another_uid_is_a_conflict_like_a_bind(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "p2", uid="e63a0047-c806-4c7b-943d-7f05c8a7d03f")  # bind-uid-mismatch's
    want = fixture("bind-uid-mismatch")
    assert evict(core, "p2", eviction("p2", OTHER_UID)) == (want["status"], want["response"])
    assert "deletionTimestamp" not in api.pod(NS, "p2")["metadata"]  # type: ignore[index]


def test_fault_knobs_apply_to_evictions(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w2")
    api.fail_next(403)
    code, answer = evict(core, "w2", eviction("w2", UID))
    assert code == 403
    assert answer["message"] == (
        f'pods "w2" is forbidden: User "{DEFAULT_USER}" cannot create resource "pods/eviction" '
        f'in API group "" in the namespace "{NS}"'
    )
    api.fail_next(503)
    assert evict(core, "w2", eviction("w2", UID))[0] == 503
    assert "deletionTimestamp" not in api.pod(NS, "w2")["metadata"]  # type: ignore[index]


def test_block_evictions_is_a_real_budget_over_a_label(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w3")
    since = api.resource_version
    api.block_evictions(NS, "w3")
    pod = api.pod(NS, "w3")
    assert pod is not None and pod["metadata"]["labels"] == {TEST_BUDGET_LABEL: "pdb-g"}
    budget = api.pdb(NS, "pdb-g")
    assert budget is not None
    assert budget["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {TEST_BUDGET_LABEL: "pdb-g"}},
    }
    assert budget["status"] == fixture("list-pdbs")["response"]["items"][0]["status"]
    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        event = next_event(response)
    assert event["type"] == "MODIFIED"
    assert event["object"]["metadata"]["labels"] == {TEST_BUDGET_LABEL: "pdb-g"}
    version = api.resource_version
    api.block_evictions(NS, "w3")  # again: the pod has its label, the budget is replaced
    assert api.pod(NS, "w3")["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]  # type: ignore[index]
    assert int(api.resource_version) == int(version) + 1
    api.allow_evictions(NS, "w3")
    assert api.pdb(NS, "pdb-g") is None
    assert evict(core, "w3", eviction("w3", UID))[0] == 201
    with pytest.raises(KeyError):
        api.block_evictions(NS, "nope")


def test_two_budgets_over_one_pod_are_upstreams_500(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(
        NS, "w3", UID, node_name="node-1", phase="Running", labels={"app": "web", "tier": "front"}
    )
    api.add_pdb(NS, "by-app", match_labels={"app": "web"}, disruptions_allowed=3)
    api.add_pdb(
        NS,
        "by-tier",
        match_expressions=[{"key": "tier", "operator": "In", "values": ["front", "api"]}],
        disruptions_allowed=3,
    )
    api.add_pdb("other", "elsewhere", select_all=True)  # another namespace: not counted
    before = [api.pdb(NS, "by-app"), api.pdb(NS, "by-tier")]
    version = api.resource_version
    # a metav1.Status returned by EvictionREST.Create: no reason, no details
    assert evict(core, "w3", eviction("w3", UID)) == (
        500,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction "
            "subresource does not support.",
            "code": 500,
        },
    )
    dry = eviction("w3", UID)
    dry["deleteOptions"]["dryRun"] = ["All"]
    assert evict(core, "w3", dry)[0] == 500
    assert [api.pdb(NS, "by-app"), api.pdb(NS, "by-tier")] == before  # both allow 3: unspent
    assert api.resource_version == version
    assert "deletionTimestamp" not in api.pod(NS, "w3")["metadata"]  # type: ignore[index]
    api.remove_pdb(NS, "by-tier")
    assert evict(core, "w3", eviction("w3", UID))[0] == 201


def test_an_empty_selector_covers_every_pod_of_its_namespace_and_none_covers_none(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w3")  # no labels at all
    api.add_pod("other", "w3", UID, node_name="node-1", phase="Running")
    api.add_pdb(NS, "everything", select_all=True, min_available=2, current_healthy=2)
    api.add_pdb(NS, "nothing")  # no selector: selects no pod (else this would be a 500)
    code, answer = evict(core, "w3", eviction("w3", UID))
    assert (code, answer["details"]["causes"][0]["message"]) == (
        429,
        "The disruption budget everything needs 2 healthy pods and has 2 currently",
    )
    assert (
        call(core.create_namespaced_pod_eviction, "w3", "other", eviction("w3", namespace="other"))[
            0
        ]
        == 201
    )
    assert api.pdb(NS, "everything")["spec"]["selector"] == {}  # type: ignore[index]
    assert "selector" not in api.pdb(NS, "nothing")["spec"]  # type: ignore[index]


def test_a_real_eviction_spends_a_disruption_and_the_next_is_refused(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    for name, uid in (("w1", "uid-w1"), ("w2", "uid-w2")):
        api.add_pod(NS, name, uid, node_name="node-1", phase="Running", labels={"app": "web"})
    added = api.add_pdb(NS, "web", match_labels={"app": "web"}, disruptions_allowed=1)
    assert added["status"] == {
        "observedGeneration": 1,
        "disruptionsAllowed": 1,
        "currentHealthy": 2,
        "desiredHealthy": 1,
        "expectedPods": 2,
    }
    assert evict(core, "w1", eviction("w1", "uid-w1"))[0] == 201
    spent = api.pdb(NS, "web")
    assert spent is not None
    assert int(spent["metadata"]["resourceVersion"]) > int(added["metadata"]["resourceVersion"])
    status = spent["status"]
    assert list(status) == [
        "observedGeneration",
        "disruptedPods",
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
        "conditions",
    ]
    assert status["disruptionsAllowed"] == 0
    assert list(status["disruptedPods"]) == ["w1"] and recent(status["disruptedPods"]["w1"])
    (condition,) = status["conditions"]
    assert recent(condition.pop("lastTransitionTime"))
    assert condition == {
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": 1,
        "reason": "InsufficientPods",
        "message": "",
    }
    assert "deletionTimestamp" in api.pod(NS, "w1")["metadata"]  # type: ignore[index]
    want = fixture("evict-pdb-blocked")["response"]
    code, answer = evict(core, "w2", eviction("w2", "uid-w2"))
    assert code == 429
    assert without(answer, "details") == without(want, "details")
    assert answer["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 2 currently",
            }
        ]
    }
    assert "deletionTimestamp" not in api.pod(NS, "w2")["metadata"]  # type: ignore[index]


def test_a_budget_is_spent_before_the_uid_precondition_fails(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    """Upstream's order: checkAndDecrement writes the budget, then the delete finds the UID
    changed; the disruption controller gives it back later (not modelled here)."""
    running(api, "p2", uid="e63a0047-c806-4c7b-943d-7f05c8a7d03f")
    api.add_pdb(NS, "web", select_all=True, disruptions_allowed=1)
    assert evict(core, "p2", eviction("p2", OTHER_UID))[0] == 409
    assert api.pdb(NS, "web")["status"]["disruptionsAllowed"] == 0  # type: ignore[index]
    assert "deletionTimestamp" not in api.pod(NS, "p2")["metadata"]  # type: ignore[index]


def dry(name: str, uid: str | None = None, values: Sequence[str] | str = ("All",)) -> JSON:
    """An Eviction with deleteOptions.dryRun (a plain string is sent as it is)."""
    body = eviction(name, uid)
    sent = values if isinstance(values, str) else list(values)
    body.setdefault("deleteOptions", {})["dryRun"] = sent
    return body


@pytest.mark.parametrize(
    ("scenario", "allowed"), [("evict-dryrun-ok", 1), ("evict-dryrun-pdb-blocked", 0)]
)
def test_a_dry_run_checks_the_budget_and_changes_nothing(
    scenario: str, allowed: int, api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    want = fixture(scenario)
    sent = want["request_body"]
    name, uid = sent["metadata"]["name"], sent["deleteOptions"]["preconditions"]["uid"]
    api.add_pod(NS, name, uid, node_name="node-1", phase="Running", labels={"app": "guarded"})
    api.add_pdb(NS, "guarded", match_labels={"app": "guarded"}, disruptions_allowed=allowed)
    pod, budget, since = api.pod(NS, name), api.pdb(NS, "guarded"), api.resource_version
    pod = json.loads(json.dumps(pod))
    assert want["request"] == f"POST {EVICTION_PATH.format(name)}"
    assert evict(core, name, sent) == (want["status"], want["response"])
    assert api.pod(NS, name) == pod and api.pdb(NS, "guarded") == budget
    assert api.resource_version == since  # nothing written
    with watch(api, "pods", resourceVersion=since, timeoutSeconds="30") as response:
        api.add_pod(NS, "next", "uid-next")
        assert next_event(response)["object"]["metadata"]["name"] == "next"  # no event before
    assert api.evictions == [(NS, name, uid)] and api.dry_run_evictions == [(NS, name, uid)]
    assert api.eviction_count(NS, name) == api.eviction_count(NS, name, dry_run=True) == 1
    assert api.eviction_count(NS, name, dry_run=False) == 0
    if allowed:  # the same eviction for real: now it is spent
        assert evict(core, name, eviction(name, uid))[0] == 201
        assert api.pdb(NS, "guarded")["status"]["disruptionsAllowed"] == 0  # type: ignore[index]
        assert api.eviction_count(NS, name, dry_run=False) == 1


def test_a_dry_run_of_a_pod_that_skips_budgets_leaves_it(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_pod(NS, "w3", UID)  # Pending: a real eviction deletes it at once
    version = api.resource_version
    assert evict(core, "w3", dry("w3", UID)) == (201, fixture("evict-dryrun-ok")["response"])
    assert api.pod(NS, "w3") is not None and api.resource_version == version
    code, answer = evict(core, "w3", dry("w3", OTHER_UID))  # the UID is checked too
    assert (code, answer["reason"]) == (409, "Conflict")


def test_a_dry_run_value_other_than_all_fails_at_the_delete(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    running(api, "w3")
    version = api.resource_version
    # upstream: rest.BeforeDelete's ValidateDeleteOptions, after the budgets
    text = 'Unsupported value: []string{"All", "X"}: supported values: "All"'
    assert evict(core, "w3", dry("w3", UID, ("All", "X"))) == (
        422,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'DeleteOptions.meta.k8s.io "" is invalid: dryRun: {text}',
            "reason": "Invalid",
            "details": {
                "group": "meta.k8s.io",
                "kind": "DeleteOptions",
                "causes": [
                    {"reason": "FieldValueNotSupported", "message": text, "field": "dryRun"}
                ],
            },
            "code": 422,
        },
    )
    api.add_pdb(NS, "web", select_all=True, disruptions_allowed=1)
    assert evict(core, "w3", dry("w3", UID, ("X",)))[0] == 422
    assert api.pdb(NS, "web")["status"]["disruptionsAllowed"] == 1  # type: ignore[index]
    api.set_pdb_status(NS, "web", disruptions_allowed=0)
    assert evict(core, "w3", dry("w3", UID, ("X",)))[0] == 429  # the budget comes first
    assert "deletionTimestamp" not in api.pod(NS, "w3")["metadata"]  # type: ignore[index]
    assert int(api.resource_version) == int(version) + 2  # add_pdb, set_pdb_status
    # not a list of strings: the body cannot be decoded, before anything else
    path = EVICTION_PATH.format("w3")  # the client itself refuses to send it
    code, answer = request(api, "POST", path, dry("w3", UID, "All"), "application/json")
    assert (code, answer["reason"], answer["message"]) == (
        400,
        "BadRequest",
        'Eviction in version "v1" cannot be handled as a Eviction: json: cannot unmarshal '
        "string into Go struct field DeleteOptions.deleteOptions.dryRun of type []string",
    )
    assert len(api.dry_run_evictions) == 4


def test_an_unprocessed_or_broken_budget_refuses_like_upstream(api: FakeKubeAPI) -> None:
    running(api, "w3")
    added = api.add_pdb(NS, "web", select_all=True, disruptions_allowed=1, processed=False)
    assert "observedGeneration" not in added["status"]  # 0: omitted, as Go's omitempty
    conn = connect(api)
    try:
        conn.request(
            "POST",
            EVICTION_PATH.format("w3"),
            json.dumps(eviction("w3", UID)),
            {"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        answer = json.loads(response.read())
    finally:
        conn.close()
    want = fixture("evict-pdb-not-processed")["response"]
    assert (response.status, response.getheader("Retry-After")) == (429, "10")
    assert answer == json.loads(json.dumps(want).replace("pdb-g", "web"))
    api.set_pdb_status(NS, "web", processed=True, disruptions_allowed=-1)
    status, answer = request(
        api, "POST", EVICTION_PATH.format("w3"), eviction("w3", UID), "application/json"
    )
    assert (status, answer["reason"], answer["message"], answer["details"]) == (
        403,
        "Forbidden",
        'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative',
        {"name": "web", "group": "policy", "kind": "poddisruptionbudget"},
    )
    api.set_pdb_status(NS, "web", disruptions_allowed=1)
    assert (
        request(api, "POST", EVICTION_PATH.format("w3"), eviction("w3", UID), "application/json")[0]
        == 201
    )


def test_fault_knobs_apply_to_dry_runs(api: FakeKubeAPI, core: kubernetes.client.CoreV1Api) -> None:
    running(api, "w2")
    api.fail_next(503)
    assert evict(core, "w2", dry("w2", UID))[0] == 503
    assert api.dry_run_evictions == [(NS, "w2", UID)] == api.evictions


# --- leases -----------------------------------------------------------------------------------

LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


@pytest.fixture
def coordination(api: FakeKubeAPI) -> Iterator[kubernetes.client.CoordinationV1Api]:
    client = client_for(api)
    yield kubernetes.client.CoordinationV1Api(client)
    closer: Callable[[], None] = client.close
    closer()


def lease_body(name: str = "decice-rebalancer", **spec: Any) -> JSON:
    want = fixture("lease-create")["response"]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {**want["spec"], **spec},
    }


def test_a_lease_is_created_like_the_fixture(
    api: FakeKubeAPI, coordination: kubernetes.client.CoordinationV1Api
) -> None:
    want = fixture("lease-create")
    assert want["request"] == f"POST {LEASES}"
    real = want["response"]
    code, lease = call(coordination.create_namespaced_lease, NS, lease_body())
    assert code == want["status"] == 201
    assert list(lease) == list(real)
    assert list(lease["metadata"]) == list(real["metadata"])
    assert lease["spec"] == real["spec"]
    assert (lease["metadata"]["name"], lease["metadata"]["namespace"]) == (
        real["metadata"]["name"],
        real["metadata"]["namespace"],
    )
    assert lease["metadata"]["resourceVersion"] == api.resource_version
    assert RFC3339.match(lease["metadata"]["creationTimestamp"])
    (fields,) = lease["metadata"]["managedFields"]
    (real_fields,) = real["metadata"]["managedFields"]
    assert list(fields) == list(real_fields)
    assert fields["fieldsV1"] == real_fields["fieldsV1"]
    assert api.lease(NS, "decice-rebalancer") == lease

    # times come back as MicroTime whatever RFC 3339 spelling was sent
    code, other = call(
        coordination.create_namespaced_lease,
        NS,
        lease_body("other", acquireTime="2026-11-23T14:26:23.5+01:00", leaseTransitions=None),
    )
    assert code == 201
    assert other["spec"]["acquireTime"] == "2026-11-23T13:26:23.500000Z"
    assert "leaseTransitions" not in other["spec"]  # omitempty, as Go


def test_a_second_create_is_the_fixture_conflict(
    coordination: kubernetes.client.CoordinationV1Api,
) -> None:
    assert call(coordination.create_namespaced_lease, NS, lease_body())[0] == 201
    want = fixture("lease-conflict")
    got = call(coordination.create_namespaced_lease, NS, lease_body())
    assert got == (want["status"], want["response"])


def test_a_missing_lease_is_a_not_found_of_its_group(
    coordination: kubernetes.client.CoordinationV1Api,
) -> None:
    conflict = fixture("lease-conflict")["response"]
    missing = fixture("evict-pod-missing")["response"]
    code, answer = call(coordination.read_namespaced_lease, "nope", NS)
    assert code == 404
    assert list(answer) == list(missing)
    assert answer["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert answer["reason"] == "NotFound"
    assert answer["details"] == {**conflict["details"], "name": "nope"}
    code, answer = call(coordination.replace_namespaced_lease, "nope", NS, lease_body("nope"))
    assert (code, answer["reason"]) == (404, "NotFound")


def test_lease_updates_are_optimistic(
    api: FakeKubeAPI, coordination: kubernetes.client.CoordinationV1Api
) -> None:
    _, lease = call(coordination.create_namespaced_lease, NS, lease_body())
    name, version = "decice-rebalancer", lease["metadata"]["resourceVersion"]
    lease["spec"]["renewTime"] = "2026-11-23T13:26:25.000000Z"
    code, renewed = call(coordination.replace_namespaced_lease, name, NS, lease)
    assert code == 200
    assert renewed["spec"]["renewTime"] == "2026-11-23T13:26:25.000000Z"
    assert int(renewed["metadata"]["resourceVersion"]) > int(version)
    assert renewed["metadata"]["uid"] == lease["metadata"]["uid"]

    lease["spec"]["holderIdentity"] = "decice-extender-1"  # from the stale version
    code, answer = call(coordination.replace_namespaced_lease, name, NS, lease)
    assert (code, answer) == (
        409,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": '
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
            "reason": "Conflict",
            "details": {"name": name, "group": "coordination.k8s.io", "kind": "leases"},
            "code": 409,
        },
    )
    assert api.lease(NS, name)["spec"]["holderIdentity"] == "decice-extender-0"  # type: ignore[index]
    same = call(coordination.replace_namespaced_lease, name, NS, renewed)[1]
    assert same["metadata"]["resourceVersion"] == renewed["metadata"]["resourceVersion"]  # no-op
    del renewed["metadata"]["resourceVersion"]
    code, answer = call(coordination.replace_namespaced_lease, name, NS, renewed)
    assert (code, answer["reason"]) == (422, "Invalid")


def test_lease_knobs(api: FakeKubeAPI, coordination: kubernetes.client.CoordinationV1Api) -> None:
    name = "decice-rebalancer"
    assert api.lease(NS, name) is None
    _, lease = call(coordination.create_namespaced_lease, NS, lease_body())
    stolen = api.steal_lease(NS, name, "decice-extender-9")
    assert stolen["spec"]["holderIdentity"] == "decice-extender-9"
    assert stolen["spec"]["leaseTransitions"] == 1
    assert stolen["spec"]["acquireTime"] == stolen["spec"]["renewTime"]
    assert MICRO_TIME.match(stolen["spec"]["renewTime"])
    assert int(stolen["metadata"]["resourceVersion"]) > int(lease["metadata"]["resourceVersion"])
    # the stolen lease's older copy can no longer be written
    assert call(coordination.replace_namespaced_lease, name, NS, lease)[0] == 409
    assert api.steal_lease(NS, "fresh", "x", duration=5)["spec"]["leaseDurationSeconds"] == 5

    api.break_leases(503)
    assert call(coordination.read_namespaced_lease, name, NS)[0] == 503
    assert call(coordination.create_namespaced_lease, NS, lease_body("y"))[0] == 503
    assert call(core_of(coordination).list_pod_for_all_namespaces)[0] == 200  # pods unaffected
    api.break_leases(None)
    assert call(coordination.read_namespaced_lease, name, NS)[0] == 200
    api.fail_next(403)
    code, answer = call(coordination.read_namespaced_lease, name, NS)
    assert (code, answer["message"]) == (
        403,
        f'leases.coordination.k8s.io "{name}" is forbidden: User "{DEFAULT_USER}" cannot get '
        f'resource "leases" in API group "coordination.k8s.io" in the namespace "{NS}"',
    )
    api.delete_lease(NS, name)
    assert call(coordination.read_namespaced_lease, name, NS)[0] == 404


MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def core_of(api: kubernetes.client.CoordinationV1Api) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api.api_client)


# --- pod field selectors and the pod helpers --------------------------------------------------


def test_pod_lists_honour_field_selectors_and_page(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    for i in range(5):
        api.add_pod(NS, f"run-{i}", f"uid-r{i}", node_name=f"node-{i % 2}", phase="Running")
    api.add_pod("other", "run-x", "uid-x", node_name="node-0", phase="Running")
    api.add_pod(NS, "pending", "uid-p")
    api.add_pod(NS, "foreign", "uid-f", scheduler_name="default-scheduler", phase="Running")

    def names(**kwargs: Any) -> list[str]:
        if "namespace" in kwargs:
            code, answer = call(core.list_namespaced_pod, **kwargs)
        else:
            code, answer = call(core.list_pod_for_all_namespaces, **kwargs)
        assert code == 200, answer
        return [p["metadata"]["name"] for p in answer["items"]]

    mine = "spec.schedulerName=decice_sched,status.phase=Running"
    assert names(field_selector=mine) == [*(f"run-{i}" for i in range(5)), "run-x"]
    assert names(field_selector=mine, namespace=NS) == [f"run-{i}" for i in range(5)]
    assert names(field_selector="spec.nodeName=node-0,metadata.namespace=decice") == [
        "run-0",
        "run-2",
        "run-4",
    ]
    assert names(field_selector="status.phase!=Running") == ["pending"]
    assert names(field_selector="spec.nodeName=") == ["foreign", "pending"]  # unbound ones
    assert names(field_selector="spec.schedulerName==default-scheduler") == ["foreign"]

    # paging within the selection
    seen: list[str] = []
    token = None
    for _ in range(4):
        _, page = call(
            core.list_pod_for_all_namespaces, field_selector=mine, limit=4, _continue=token
        )
        seen += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
        if token is None:
            break
        assert page["metadata"]["remainingItemCount"] == 2
    assert seen == names(field_selector=mine)

    code, answer = call(core.list_pod_for_all_namespaces, field_selector="spec.priority=0")
    assert (code, answer["reason"], answer["message"]) == (
        400,
        "BadRequest",
        "field label not supported: spec.priority",
    )


def test_add_pod_makes_owned_running_pods(api: FakeKubeAPI) -> None:
    pod = api.add_pod(
        NS,
        "web-1",
        UID,
        node_name="node-1",
        phase="Running",
        owner=("ReplicaSet", "web-5d4f8"),
        annotations={"decice.io/policy": "gpu"},
        labels={"app": "web"},
        created=1_700_000_000,
    )
    meta = pod["metadata"]
    assert list(meta) == [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "labels",
        "annotations",
        "ownerReferences",
    ]
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    (owner,) = meta["ownerReferences"]
    assert owner["apiVersion"] == "apps/v1"
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ReplicaSet", "web-5d4f8", True)
    assert owner["blockOwnerDeletion"] is True
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["startTime"] == meta["creationTimestamp"]
    assert pod["spec"]["nodeName"] == "node-1"

    mirror = api.add_pod(
        "kube-system",
        "etcd-node-1",
        "uid-m",
        node_name="node-1",
        phase="Running",
        owner=("Node", "node-1"),
    )
    (owner,) = mirror["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["controller"]) == ("v1", "Node", True)
    assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"]
    for kind in ("StatefulSet", "DaemonSet"):
        made = api.add_pod(NS, kind.lower(), f"uid-{kind}", owner=(kind, "x"))
        assert made["metadata"]["ownerReferences"][0]["kind"] == kind
    with pytest.raises(ValueError, match="owner"):
        api.add_pod(NS, "bad", "uid-b", owner=("CronJob", "x"))
    with pytest.raises(ValueError, match="phase"):
        api.add_pod(NS, "bad", "uid-b", phase="Sleeping")


# --- PodDisruptionBudgets and label selectors -------------------------------------------------


def test_label_selectors_match_as_kubernetes_does() -> None:
    web = {"app": "web", "tier": "front"}

    def expr(key: str, operator: str, *values: str) -> JSON:
        found: JSON = {"key": key, "operator": operator}
        if values:
            found["values"] = list(values)
        return found

    assert not label_selector_matches(None, web)  # no selector: nothing
    assert label_selector_matches({}, web) and label_selector_matches({}, None)  # {}: all
    assert label_selector_matches({"matchLabels": {"app": "web"}}, web)
    assert not label_selector_matches({"matchLabels": {"app": "web", "x": "1"}}, web)
    assert not label_selector_matches({"matchLabels": {"app": "web"}}, {})
    cases = [
        (expr("tier", "In", "front", "api"), True),
        (expr("tier", "In", "back"), False),
        (expr("zone", "In", "a"), False),  # In needs the label
        (expr("tier", "NotIn", "back"), True),
        (expr("tier", "NotIn", "front"), False),
        (expr("zone", "NotIn", "a"), True),  # NotIn: an absent label passes
        (expr("app", "Exists"), True),
        (expr("zone", "Exists"), False),
        (expr("zone", "DoesNotExist"), True),
        (expr("app", "DoesNotExist"), False),
    ]
    for requirement, matches in cases:
        assert label_selector_matches({"matchExpressions": [requirement]}, web) is matches, (
            requirement
        )
    both = {"matchLabels": {"app": "web"}, "matchExpressions": [expr("tier", "In", "back")]}
    assert not label_selector_matches(both, web)  # every requirement must hold
    for bad in (expr("app", "Equals", "web"), expr("app", "In"), expr("app", "Exists", "web")):
        with pytest.raises(ValueError):  # refused even after a failing requirement
            label_selector_matches({"matchLabels": {"x": "1"}, "matchExpressions": [bad]}, web)


@pytest.fixture
def policy(api: FakeKubeAPI) -> Iterator[kubernetes.client.PolicyV1Api]:
    client = client_for(api)
    yield kubernetes.client.PolicyV1Api(client)
    closer: Callable[[], None] = client.close
    closer()


def test_a_pdb_list_is_shaped_like_the_fixture(
    api: FakeKubeAPI, policy: kubernetes.client.PolicyV1Api
) -> None:
    captured = fixture("list-pdbs")
    assert captured["request"] == "GET /apis/policy/v1/poddisruptionbudgets?limit=500"
    want = captured["response"]
    (real,) = want["items"]
    api.add_pdb("decice", "guarded", match_labels={"app": "guarded"})
    code, got = call(policy.list_pod_disruption_budget_for_all_namespaces, limit=500)
    assert code == captured["status"] == 200
    assert list(got) == list(want)
    assert (got["kind"], got["apiVersion"]) == ("PodDisruptionBudgetList", "policy/v1")
    assert got["metadata"] == {"resourceVersion": api.resource_version}
    (item,) = got["items"]
    assert list(item) == list(real)  # no kind / apiVersion in a list's items
    assert list(item["metadata"]) == [k for k in real["metadata"] if k != "managedFields"]
    assert (item["spec"], item["status"]) == (real["spec"], real["status"])
    assert item["metadata"]["resourceVersion"] == api.resource_version
    assert item["metadata"]["generation"] == real["metadata"]["generation"] == 1
    assert api.pdb("decice", "guarded") == item

    api.add_pdb("a", "first", select_all=True)
    api.add_pdb("decice", "another", match_expressions=[{"key": "app", "operator": "Exists"}])
    names: list[str] = []
    token = None
    for _ in range(4):
        _, page = call(
            policy.list_pod_disruption_budget_for_all_namespaces, limit=2, _continue=token
        )
        names += [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in page["items"]]
        token = page["metadata"].get("continue")
        if token is None:
            break
        assert page["metadata"]["remainingItemCount"] == 1
    assert names == ["a/first", "decice/another", "decice/guarded"]  # etcd key order
    _, mine = call(policy.list_namespaced_pod_disruption_budget, "decice")
    assert [p["metadata"]["name"] for p in mine["items"]] == ["another", "guarded"]


def test_pdb_helpers(api: FakeKubeAPI) -> None:
    added = api.add_pdb(
        NS, "web", match_labels={"app": "web"}, processed=False, disruptions_allowed=2
    )
    assert added["status"] == {
        "disruptionsAllowed": 2,
        "currentHealthy": 3,
        "desiredHealthy": 1,
        "expectedPods": 3,
    }
    added["status"]["disruptionsAllowed"] = 99  # a copy
    changed = api.set_pdb_status(
        NS, "web", processed=True, disruptions_allowed=0, current_healthy=1
    )
    assert changed["status"] == {
        "observedGeneration": 1,
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    assert changed["metadata"]["resourceVersion"] == api.resource_version
    assert api.pdb(NS, "web") == changed
    api.remove_pdb(NS, "web")
    assert api.pdb(NS, "web") is None
    with pytest.raises(KeyError):
        api.remove_pdb(NS, "web")
    with pytest.raises(KeyError):
        api.set_pdb_status(NS, "web", disruptions_allowed=1)
    with pytest.raises(ValueError):
        api.add_pdb(NS, "bad", match_expressions=[{"key": "app", "operator": "In"}])
    with pytest.raises(ValueError):
        api.add_pdb(NS, "bad", select_all=True, match_labels={"app": "web"})


def test_fault_knobs_apply_to_pdb_lists(
    api: FakeKubeAPI, policy: kubernetes.client.PolicyV1Api
) -> None:
    api.fail_next(403, times=2)
    code, answer = call(policy.list_pod_disruption_budget_for_all_namespaces)
    assert (code, answer["message"], answer["details"]) == (
        403,
        f'poddisruptionbudgets.policy is forbidden: User "{DEFAULT_USER}" cannot list resource '
        '"poddisruptionbudgets" in API group "policy" at the cluster scope',
        {"group": "policy", "kind": "poddisruptionbudgets"},
    )
    code, answer = call(policy.list_namespaced_pod_disruption_budget, NS)
    assert (code, answer["message"]) == (
        403,
        f'poddisruptionbudgets.policy is forbidden: User "{DEFAULT_USER}" cannot list resource '
        f'"poddisruptionbudgets" in API group "policy" in the namespace "{NS}"',
    )
    api.fail_next(503)
    assert call(policy.list_pod_disruption_budget_for_all_namespaces)[0] == 503
    assert call(policy.list_pod_disruption_budget_for_all_namespaces)[0] == 200


# --- node patches (taints) --------------------------------------------------------------------

NODE_PATH = "/api/v1/nodes/{}"


def node_patch(api: FakeKubeAPI, name: str, body: Any, content_type: str) -> tuple[int, JSON]:
    return request(api, "PATCH", NODE_PATH.format(name), body, content_type)


def with_version(body: Any, version: str) -> Any:
    """A captured patch body with `version` where it names the node's resourceVersion."""
    body = copy.deepcopy(body)
    if isinstance(body, list):  # a JSON patch: its test of /metadata/resourceVersion
        for operation in body:
            if operation.get("path") == "/metadata/resourceVersion":
                operation["value"] = version
    else:
        body["metadata"]["resourceVersion"] = version
    return body


def test_a_json_patch_taints_a_node_like_the_fixture(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    captured = fixture("patch-node-taint-ok")
    assert captured["request"] == f"PATCH {NODE_PATH.format('node-1')}"
    assert captured["request_content_type"] == "application/json-patch+json"
    want = captured["response"]
    api.add_node("node-1", "127.0.0.1")
    since = api.resource_version
    body = with_version(captured["request_body"], since)
    code, node = call(core.patch_node, "node-1", body, _content_type="application/json-patch+json")
    assert code == captured["status"] == 200
    assert api.requests[-1].headers["content-type"] == "application/json-patch+json"
    assert list(node) == list(want)
    assert (node["kind"], node["apiVersion"]) == ("Node", "v1")
    assert list(node["metadata"]) == [k for k in want["metadata"] if k != "managedFields"]
    assert node["spec"] == want["spec"]  # no timeAdded for NoSchedule
    assert node["metadata"]["resourceVersion"] == api.resource_version == str(int(since) + 1)
    assert api.node("node-1") == without_kind(node)
    with watch(api, "nodes", resourceVersion=since, timeoutSeconds="30") as response:
        assert next_event(response) == {"type": "MODIFIED", "object": node}


def without_kind(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def test_a_failed_json_patch_test_is_422_and_a_stale_strategic_patch_409(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    api.add_node("node-1", "127.0.0.1")
    stale = api.resource_version
    api.taint_node("node-1", "someone.else/maintenance", "", "NoSchedule")  # another writer
    before, version = api.node("node-1"), api.resource_version

    json_patch = fixture("patch-node-taint-stale")
    assert json_patch["request_content_type"] == "application/json-patch+json"
    body = with_version(json_patch["request_body"], stale)
    got = node_patch(api, "node-1", body, json_patch["request_content_type"])
    assert got == (json_patch["status"], json_patch["response"]) == (422, json_patch["response"])

    merge = fixture("patch-node-conflict")
    assert merge["request_content_type"] == "application/strategic-merge-patch+json"
    body = with_version(merge["request_body"], stale)
    for content_type in (merge["request_content_type"], "application/merge-patch+json"):
        got = node_patch(api, "node-1", body, content_type)
        assert got == (merge["status"], merge["response"]) == (409, merge["response"])
    # a JSON patch that replaces the version with a stale one is the same optimistic 409
    replace = [{"op": "replace", "path": "/metadata/resourceVersion", "value": stale}]
    assert node_patch(api, "node-1", replace, "application/json-patch+json") == got
    # any operation that does not apply is the same 422 as a failed test
    for operations in (
        [{"op": "remove", "path": "/spec/taints/5"}],
        [{"op": "replace", "path": "/spec/unschedulable", "value": True}],
        [{"op": "add", "path": "/spec/nothing/here", "value": 1}],
        [{"op": "frobnicate", "path": "/spec"}],
    ):
        assert node_patch(api, "node-1", operations, "application/json-patch+json") == (
            422,
            json_patch["response"],
        )
    assert api.node("node-1") == before and api.resource_version == version


def test_a_strategic_patch_replaces_the_taints_like_the_fixture(
    api: FakeKubeAPI, core: kubernetes.client.CoreV1Api
) -> None:
    captured = fixture("patch-node-untaint-strategic")
    want = captured["response"]
    api.add_node("node-1", "127.0.0.1")
    api.taint_node("node-1", "decice.io/overloaded", "cpu", "NoSchedule")
    api.taint_node("node-1", "someone.else/maintenance", "", "NoExecute")
    mine = {"key": "decice.io/overloaded", "value": "cpu", "effect": "NoSchedule"}
    node = api.node("node-1")
    assert node is not None
    theirs = node["spec"]["taints"][1]
    assert list(theirs) == ["key", "effect", "timeAdded"] and recent(theirs["timeAdded"])
    since = api.resource_version
    # keep the other writer's taint: the list is replaced as sent (no merge key)
    body = {"metadata": {"resourceVersion": since}, "spec": {"taints": [theirs]}}
    code, node = call(
        core.patch_node, "node-1", body, _content_type=captured["request_content_type"]
    )
    assert code == 200
    assert node["spec"] == {"taints": [theirs]}
    assert mine not in node["spec"]["taints"]
    body = with_version(captured["request_body"], node["metadata"]["resourceVersion"])
    code, node = node_patch(api, "node-1", body, captured["request_content_type"])
    assert code == captured["status"] == 200
    assert list(node) == list(want)
    assert list(node["metadata"]) == [k for k in want["metadata"] if k != "managedFields"]
    assert node["spec"] == want["spec"] == {}
    assert node["metadata"]["resourceVersion"] == api.resource_version == str(int(since) + 2)
    with watch(api, "nodes", resourceVersion=since, timeoutSeconds="30") as response:
        events = [next_event(response) for _ in range(2)]
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED"]
    assert events[1]["object"] == node


def test_node_patches_check_what_the_server_checks(api: FakeKubeAPI) -> None:
    api.add_node("node-1", "127.0.0.1")
    strategic = "application/strategic-merge-patch+json"
    assert node_patch(api, "node-404", {"spec": {}}, strategic) == (
        404,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'nodes "node-404" not found',
            "reason": "NotFound",
            "details": {"name": "node-404", "kind": "nodes"},
            "code": 404,
        },
    )
    version = api.resource_version
    # no version in the patch: unconditional; labels merge; a status change is dropped
    code, node = node_patch(
        api,
        "node-1",
        {"metadata": {"labels": {"zone": "a"}}, "status": {"capacity": {"cpu": "64"}}},
        "application/merge-patch+json",
    )
    assert code == 200 and node["metadata"]["labels"]["zone"] == "a"
    assert node["status"]["capacity"]["cpu"] == "4"
    assert node["metadata"]["resourceVersion"] == str(int(version) + 1)
    code, again = node_patch(api, "node-1", {"metadata": {"labels": {"zone": "a"}}}, strategic)
    assert again["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]  # no-op
    code, answer = node_patch(api, "node-1", {"spec": {"taints": [{"key": "k"}]}}, strategic)
    assert (code, answer["message"], answer["details"]["causes"]) == (
        422,
        'Node "node-1" is invalid: spec.taints[0].effect: Required value',
        [
            {
                "reason": "FieldValueRequired",
                "message": "Required value",
                "field": "spec.taints[0].effect",
            }
        ],
    )
    code, answer = node_patch(
        api, "node-1", {"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}, strategic
    )
    assert (code, answer["reason"]) == (422, "Invalid")
    assert answer["details"]["causes"][0]["message"] == (
        'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", '
        '"NoExecute"'
    )
    code, answer = node_patch(api, "node-1", {"spec": {"podCIDR": "10.0.0.0/24"}}, strategic)
    assert (code, answer["message"]) == (
        500,
        "fake kube-apiserver: patch of ['spec.podCIDR'] not supported",
    )
    code, answer = node_patch(api, "node-1", {"op": "add"}, "application/json-patch+json")
    assert (code, answer["reason"]) == (400, "BadRequest")
    code, answer = node_patch(api, "node-1", {"spec": {}}, "application/json")
    assert (code, answer["reason"]) == (415, "UnsupportedMediaType")
    code, answer = request(api, "POST", NODE_PATH.format("node-1"), {}, "application/json")
    assert (code, answer["reason"]) == (405, "MethodNotAllowed")
    code, got = request(api, "GET", NODE_PATH.format("node-1"), None, "application/json")
    assert code == 200 and without_kind(got) == api.node("node-1")
    assert request(api, "GET", NODE_PATH.format("node-404"), None, "application/json")[0] == 404


def test_taint_node_is_another_writer(api: FakeKubeAPI) -> None:
    api.add_node("node-1", "127.0.0.1")
    since = api.resource_version
    tainted = api.taint_node("node-1", "example.com/drain", "yes", "NoSchedule")
    assert tainted["spec"] == {
        "taints": [{"key": "example.com/drain", "value": "yes", "effect": "NoSchedule"}]
    }
    again = api.taint_node("node-1", "example.com/drain", "no", "NoSchedule")  # replaced
    assert again["spec"]["taints"] == [
        {"key": "example.com/drain", "value": "no", "effect": "NoSchedule"}
    ]
    assert api.node("node-1") == again and api.node("nope") is None
    with watch(api, "nodes", resourceVersion=since, timeoutSeconds="30") as response:
        assert [next_event(response)["type"] for _ in range(2)] == ["MODIFIED", "MODIFIED"]
    with pytest.raises(KeyError):
        api.taint_node("nope", "k")
    with pytest.raises(ValueError):
        api.taint_node("node-1", "k", effect="Sometimes")


def test_fault_knobs_apply_to_node_patches(api: FakeKubeAPI) -> None:
    api.add_node("node-1", "127.0.0.1")
    body = [{"op": "add", "path": "/spec/unschedulable", "value": True}]
    api.fail_next(403)
    code, answer = node_patch(api, "node-1", body, "application/json-patch+json")
    assert (code, answer["message"], answer["details"]) == (
        403,
        f'nodes "node-1" is forbidden: User "{DEFAULT_USER}" cannot patch resource "nodes" in '
        'API group "" at the cluster scope',
        {"name": "node-1", "kind": "nodes"},
    )
    version = api.resource_version
    api.delay_next(60, after=True)  # applied, but the answer is held back
    answers: list[tuple[int, JSON]] = []
    worker = threading.Thread(
        target=lambda: answers.append(
            node_patch(api, "node-1", body, "application/json-patch+json")
        )
    )
    worker.start()
    try:
        wait_until(lambda: api.resource_version != version, 30, "the patch took effect")
        assert answers == []
    finally:
        api.release_delays()
        worker.join(30)
    ((code, node),) = answers
    assert code == 200 and node["spec"] == {"unschedulable": True}


# --- Events about Nodes -----------------------------------------------------------------------

EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{}/events"


def test_an_event_about_a_node_is_stored_like_the_fixture(api: FakeKubeAPI) -> None:
    captured = fixture("event-node-create")
    assert captured["request"] == f"POST {EVENTS_PATH.format('default')}"
    want = captured["response"]
    code, event = request(
        api, "POST", EVENTS_PATH.format("default"), captured["request_body"], "application/json"
    )
    assert code == captured["status"] == 201
    assert list(event) == list(want)
    assert list(event["metadata"]) == list(want["metadata"])
    assert list(event["regarding"]) == list(want["regarding"])
    assert event["regarding"] == want["regarding"]
    name = event["metadata"]["name"]
    assert name.startswith("node-1-") and len(name) == len(want["metadata"]["name"])
    assert set(name[len("node-1-") :]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert recent(event["metadata"]["creationTimestamp"])
    assert event["metadata"]["resourceVersion"] == api.resource_version
    (fields,) = event["metadata"]["managedFields"]
    (real_fields,) = want["metadata"]["managedFields"]
    assert without(fields, "time") == without(real_fields, "time")
    assert fields["fieldsV1"] == real_fields["fieldsV1"]
    for key in ("deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        assert event[key] == want[key]
    assert {k: event[k] for k in ("note", "type", "action", "reason")} == {
        k: want[k] for k in ("note", "type", "action", "reason")
    }
    assert api.events == [event]


def test_a_node_event_outside_default_is_refused(api: FakeKubeAPI) -> None:
    body = fixture("event-node-create")["request_body"]
    code, answer = request(api, "POST", EVENTS_PATH.format(NS), body, "application/json")
    assert (code, answer["reason"], answer["details"]["causes"]) == (
        422,
        "Invalid",
        [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "": does not match event.namespace',
                "field": "involvedObject.namespace",
            }
        ],
    )
    assert answer["message"].endswith(
        'is invalid: involvedObject.namespace: Invalid value: "": does not match event.namespace'
    )
    kube_system = request(api, "POST", EVENTS_PATH.format("kube-system"), body, "application/json")
    assert kube_system[0] == 201  # upstream allows kube-system too
    # with eventTime, the reporting fields are required
    bare = {k: v for k, v in body.items() if k not in ("reportingInstance", "action")}
    code, answer = request(api, "POST", EVENTS_PATH.format("default"), bare, "application/json")
    assert (code, [c["field"] for c in answer["details"]["causes"]]) == (
        422,
        ["reportingInstance", "action"],
    )


def test_a_generate_name_ending_in_a_dot_is_the_fixture_422(api: FakeKubeAPI) -> None:
    captured = fixture("event-node-bad-generatename")
    want = captured["response"]
    code, answer = request(
        api, "POST", EVENTS_PATH.format("default"), captured["request_body"], "application/json"
    )
    assert code == captured["status"] == 422
    name = answer["details"]["name"]
    assert name.startswith("node-1.") and len(name) == len(want["details"]["name"])
    assert answer == json.loads(json.dumps(want).replace(want["details"]["name"], name))
    assert api.events == []
