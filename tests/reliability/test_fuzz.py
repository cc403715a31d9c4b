"""Hostile input on every endpoint, in process (starlette TestClient): invalid JSON,
wrong types, nulls, deep nesting, huge arrays, unicode, missing and extra fields, wrong
method, wrong content type, oversized bodies. Zero 5xx; every 4xx names the problem.

Bounded: a few hundred hypothesis examples per test, no example database, no deadline.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from extender.policy.settings import Settings
from extender.service.compose import Service, build_service
from tests.harness.counts import COUNTS
from tests.harness.fixtures import fixture_json
from tests.harness.kubeapi import FakeKubeAPI
from tests.harness.stack import MAX_BODY, NS, kube_client

VERBS = ("filter", "prioritize", "bind", "preempt")
GETS = ("/healthz", "/readyz", "/metrics", "/openapi.json")
JSON_HEADERS = {"Content-Type": "application/json"}
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: A valid body per verb (captured from kube-scheduler), the seed of the mutations.
VALID = {
    "filter": fixture_json("filter-nodecache.json"),
    "prioritize": fixture_json("prioritize-fullnodes.json"),
    "bind": fixture_json("bind.json"),
    "preempt": fixture_json("preempt-nodecache.json"),
}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=25,
)
#: Names the scheduler never sends, and the odd ones it could: unicode, controls, huge.
odd_text = st.one_of(
    st.text(max_size=80),
    st.sampled_from(
        [
            "",
            " ",
            "node-1\x00",
            "../../etc/passwd",
            "node-1/binding",
            "%2e%2e",
            "\u202enode-1",
            "\u200bnode-1",
            "nöde-ü-日本",
            "🙂" * 20,
            "x" * 5000,
            "node-1?dryRun=All",
        ]
    ),
)


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Service, FakeKubeAPI]]:
    from extender.policy.loading import parse_settings
    from tests.harness.stack import policy

    settings: Settings = parse_settings(policy())
    with FakeKubeAPI() as api:
        api.add_pod(NS, "with-requests", "9e764942-ad6e-420d-b0b4-8a8d15daa8fb")
        yield build_service(settings, kube=kube_client(api, settings)), api


@pytest.fixture(scope="module")
def client(stack: tuple[Service, FakeKubeAPI]) -> Iterator[TestClient]:
    with TestClient(stack[0].app, raise_server_exceptions=False) as c:
        yield c


def check(verb: str, status: int, body: bytes, what: str, request: bytes = b"") -> None:
    """Zero 5xx; a 4xx carries {"Error": "<what is wrong>"}; a 200 has the verb's shape."""
    COUNTS[f"fuzz cases ({what})"] += 1
    COUNTS["fuzz cases (total)"] += 1
    if status >= 500:
        COUNTS["fuzz 5xx"] += 1
    assert status < 500, f"{verb}: {status} {body[:300]!r} for {request[:300]!r}"
    if status == 405:
        assert b"Method Not Allowed" in body
        return
    if status == 404:
        assert b"Not Found" in body
        return
    doc = orjson.loads(body)
    if status >= 400:
        COUNTS["fuzz 4xx"] += 1
        assert status in (400, 413, 415), status
        assert isinstance(doc, dict) and isinstance(doc.get("Error"), str), doc
        assert len(doc["Error"]) > 10, doc
        return
    assert status == 200
    if verb == "filter":
        assert isinstance(doc, dict) and doc["Error"] == ""
        assert isinstance(doc["FailedAndUnresolvableNodes"], dict)
        assert (doc["NodeNames"] is None) != (doc["Nodes"] is None)
    elif verb == "prioritize":
        assert isinstance(doc, list)
        for item in doc:
            assert set(item) == {"Host", "Score"} and 0 <= item["Score"] <= 10
    elif verb == "bind":
        assert set(doc) == {"Error"} and isinstance(doc["Error"], str)
    else:
        assert set(doc) == {"NodeNameToMetaVictims"}


def send(client: TestClient, verb: str, content: bytes, **headers: str) -> tuple[int, bytes]:
    response = client.post(f"/{verb}", content=content, headers=headers or JSON_HEADERS)
    return response.status_code, response.content


# --- generated bodies ------------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(data=st.binary(max_size=512))
def test_random_bytes(client: TestClient, verb: str, data: bytes) -> None:
    check(verb, *send(client, verb, data), "random bytes", data)


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(value=json_values)
def test_random_json(client: TestClient, verb: str, value: Any) -> None:
    body = orjson.dumps(value)
    check(verb, *send(client, verb, body), "random JSON", body)


def _paths(doc: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    """Every path into `doc` (dict keys and list indexes), the first 8 list items only."""
    yield prefix
    if depth > 8:
        return
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k), depth + 1)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:8]):
            yield from _paths(v, (*prefix, i), depth + 1)


PATHS = {verb: [p for p in _paths(body) if p] for verb, body in VALID.items()}


def _writable(container: dict[str, Any] | list[Any], key: Any) -> bool:
    """`container[key] = value` keeps a JSON document: a str key of a dict (JSON object
    keys are strings), or the index of an item of a list."""
    if isinstance(container, dict):
        return isinstance(key, str)
    return type(key) is int and 0 <= key < len(container)


def _holds(container: dict[str, Any] | list[Any], key: Any) -> bool:
    """`container[key]` exists."""
    return _writable(container, key) and (isinstance(container, list) or key in container)


def _container(doc: Any, path: tuple[Any, ...]) -> dict[str, Any] | list[Any] | None:
    """The object or array that `path`'s last key addresses, or None when an earlier
    mutation removed or replaced a step of the path (a list may have become an object:
    an index then addresses nothing, it is never written as an object key)."""
    node = doc
    for key in path[:-1]:
        if not isinstance(node, dict | list) or not _holds(node, key):
            return None
        node = node[key]
    return node if isinstance(node, dict | list) else None


@st.composite
def mutated(draw: st.DrawFn, verb: str) -> Any:
    """The captured body with 1..3 mutations: a value replaced, a key removed, a key added.
    Every mutation keeps a JSON document (str object keys), so orjson can send it."""
    doc = copy.deepcopy(VALID[verb])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS[verb]))
        parent = _container(doc, path)
        if parent is None:
            continue  # an earlier mutation removed or replaced this path
        last = path[-1]
        action = draw(st.sampled_from(["replace", "delete", "add", "text"]))
        if action in ("replace", "text"):
            if _writable(parent, last):
                parent[last] = draw(json_values if action == "replace" else odd_text)
        elif action == "delete":
            if _holds(parent, last):
                del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return doc


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(data=st.data())
def test_mutated_scheduler_bodies(client: TestClient, verb: str, data: st.DataObject) -> None:
    doc = data.draw(mutated(verb))
    body = orjson.dumps(doc)
    check(verb, *send(client, verb, body), "mutated captured body", body)


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@FUZZ
@given(
    names=st.lists(st.one_of(odd_text, json_values), max_size=30),
    scheduler=st.sampled_from(["decice_sched", "default-scheduler", "", None, 7]),
)
def test_node_names_of_any_type(
    client: TestClient, verb: str, names: list[Any], scheduler: Any
) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": NS, "uid": "u-1"},
        "spec": {"schedulerName": scheduler},
    }
    body = orjson.dumps({"Pod": pod, "NodeNames": names, "Nodes": None})
    check(verb, *send(client, verb, body), "NodeNames of any type", body)


@FUZZ
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "PodName": st.one_of(odd_text, json_values),
            "PodNamespace": st.one_of(odd_text, json_values),
            "PodUID": st.one_of(odd_text, json_values),
            "Node": st.one_of(odd_text, json_values),
        },
    )
)
def test_binding_args_of_any_type(client: TestClient, fields: dict[str, Any]) -> None:
    body = orjson.dumps(fields)
    check("bind", *send(client, "bind", body), "binding args of any type", body)


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(
    ctype=st.one_of(
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60),
        st.sampled_from(
            [
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; b=x",
                "application/jsonx",
                "application/json-patch+json",
                "application/yaml",
                "APPLICATION/JSON; charset=utf-8",
                "application/json;",
                "",
            ]
        ),
    )
)
def test_wrong_content_type_is_415(client: TestClient, verb: str, ctype: str) -> None:
    body = orjson.dumps(VALID[verb])
    status, answer = send(client, verb, body, **{"Content-Type": ctype})
    check(verb, status, answer, "wrong content type")
    if ctype.split(";", 1)[0].strip().lower() != "application/json":
        assert status == 415, (ctype, answer)
        assert b"Content-Type must be application/json" in answer


# --- the named cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_verbs_are_post_only(client: TestClient, verb: str, method: str) -> None:
    response = client.request(method, f"/{verb}", content=b"{}", headers=JSON_HEADERS)
    check(verb, response.status_code, response.content, "wrong method")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize("path", GETS)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_read_endpoints_are_get_only(client: TestClient, path: str, method: str) -> None:
    response = client.request(method, path, content=b"{}", headers=JSON_HEADERS)
    check("get", response.status_code, response.content, "wrong method")
    assert response.status_code == 405


def test_unknown_paths_are_404(client: TestClient) -> None:
    for path in ("/", "/filter/", "/bind/x", "/admin", "/%2e%2e/etc/passwd", "/openapi.yaml"):
        response = client.post(path, content=b"{}", headers=JSON_HEADERS)
        check("unknown", response.status_code, response.content, "unknown path")
        assert response.status_code in (400, 404, 405)  # /filter/ redirects to /filter


@pytest.mark.parametrize("path", GETS)
def test_read_endpoints_answer(client: TestClient, path: str) -> None:
    response = client.get(path)
    COUNTS["fuzz cases (total)"] += 1
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"null",
        b"[]",
        b'"Pod"',
        b"{",
        b"\xff\xfe\x00",
        b'{"Pod": {"metadata": {"name": "\\ud800"}}}',  # a lone surrogate
        b"{}",
        b'{"Pod": null}',
        b'{"Pod": {}}',
        b'{"Pod": {"metadata": null}}',
        b'{"Pod": {"metadata": {"name": 1}}}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": null, "Nodes": null}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": {"node-1": 1}}',
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [null]}}',
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": []}]}}',
        b'{"PodName": "p", "PodNamespace": "n", "PodUID": "u", "Node": null}',
        b'{"PodName": "", "PodNamespace": "n", "PodUID": "u", "Node": "n"}',
        b"1e999",
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1e999]}',
        b'{"a": 123456789012345678901234567890}',
    ],
)
def test_named_bad_bodies(client: TestClient, verb: str, body: bytes) -> None:
    status, answer = send(client, verb, body)
    check(verb, status, answer, "named bad bodies")
    valid_for_preempt = (verb == "preempt" and b'"NodeNames"' in body) or b'"Nodes"' in body
    assert status == 400 or valid_for_preempt, answer


@pytest.mark.parametrize("verb", VERBS)
def test_deep_nesting(client: TestClient, verb: str) -> None:
    for depth in (100, 1_000, 100_000):
        body = b'{"Pod": ' + b"[" * depth + b"]" * depth + b"}"
        status, answer = send(client, verb, body)
        check(verb, status, answer, "deep nesting")
        assert status == 400


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_huge_node_list_within_the_limit(client: TestClient, verb: str) -> None:
    names = [f"node-{i}" for i in range(60_000)]  # ~0.8 MB, under the 1 MB limit
    doc = {"Pod": VALID["filter"]["Pod"], "NodeNames": names, "Nodes": None}
    body = orjson.dumps(doc)
    assert len(body) < MAX_BODY
    status, answer = send(client, verb, body)
    check(verb, status, answer, "huge arrays")
    assert status == 200


@pytest.mark.parametrize("verb", VERBS)
def test_oversized_body_is_413(client: TestClient, verb: str) -> None:
    body = b'{"Pod": {"metadata": {"name": "' + b"x" * MAX_BODY + b'"}}}'
    status, answer = send(client, verb, body)
    check(verb, status, answer, "oversized")
    assert status == 413 and b"maxBodyBytes" in answer


@pytest.mark.parametrize("verb", VERBS)
def test_oversized_chunked_body_without_length_is_413(client: TestClient, verb: str) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"NodeNames": ['
        for _ in range(200):
            yield b'"' + b"n" * 10_000 + b'",'
        yield b'"x"]}'

    response = client.post(f"/{verb}", content=chunks(), headers=JSON_HEADERS)
    assert "content-length" not in {k.lower() for k in response.request.headers}
    check(verb, response.status_code, response.content, "oversized")
    assert response.status_code == 413


@pytest.mark.parametrize("verb", VERBS)
def test_lying_content_length_is_refused(client: TestClient, verb: str) -> None:
    headers = {**JSON_HEADERS, "Content-Length": str(MAX_BODY + 1)}
    response = client.post(f"/{verb}", content=b"{}", headers=headers)
    check(verb, response.status_code, response.content, "oversized")
    assert response.status_code in (400, 413)


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        (
            "filter",
            {
                "Pod": {
                    "metadata": {"name": "p", "uid": "u"},
                    "spec": {"schedulerName": "decice_sched"},
                },
                "NodeNames": ["zzz", []],
            },
        ),
        (
            "filter",
            {
                "Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": None}]}},
                "NodeNames": ["node-1"],
            },
        ),
        (
            "prioritize",
            {
                "Pod": {
                    "metadata": {"name": "p"},
                    "spec": {"initContainers": [{"resources": "x"}]},
                },
                "NodeNames": ["node-1"],
            },
        ),
    ],
)
def test_found_5xx_stay_fixed(client: TestClient, verb: str, body: Any) -> None:
    """The two 5xx this fuzzer found (engine.filter: an unhashable NodeNames entry after a
    node that is not ok; wire: `resources` that is not an object), as regressions."""
    request = orjson.dumps(body)
    status, answer = send(client, verb, request)
    check(verb, status, answer, "found 5xx regressions", request)
    assert status in (200, 400), answer


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(["pod", "uid", "x"]), st.one_of(odd_text, st.text(max_size=300)), max_size=3
    )
)
def test_explain_query_of_any_kind(client: TestClient, params: dict[str, str]) -> None:
    response = client.get("/explain", params=params)
    COUNTS["fuzz cases (explain query)"] += 1
    COUNTS["fuzz cases (total)"] += 1
    assert response.status_code in (200, 400, 404), response.text
    if response.status_code != 200:  # 404 is ours too: an unknown pod, named
        error = response.json()["Error"]
        assert "explain" in error or "pod" in error or "uid" in error, error
