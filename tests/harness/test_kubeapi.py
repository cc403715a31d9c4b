"""tests.harness.kubeapi.FakeKubeAPI against the answers of a real kube-apiserver
(fixtures/kube-apiserver/): lists, watch streams, pod patches and the lifecycle helpers.

Lists and patches go through the real `kubernetes` client; watch streams are read with
http.client, one line per event, so the chunked framing itself is under test. Every read
is bounded by the socket timeout; no test sleeps to wait.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import kubernetes.client
import kubernetes.watch
import pytest

from tests.harness.fixtures import APISERVER
from tests.harness.kubeapi import DEFAULT_USER, WATCH_CONTENT_TYPE, FakeKubeAPI, client_for
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
