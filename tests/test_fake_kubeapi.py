"""tests.kubeapi.FakeKubeAPI against the answers of a real kube-apiserver
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

from tests.conftest import APISERVER
from tests.kubeapi import DEFAULT_USER, WATCH_CONTENT_TYPE, FakeKubeAPI, client_for
from tests.loopback import wait_until

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
