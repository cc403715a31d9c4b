"""The verbs on raw ASGI (extender.service.verbs, `Verbs.front`), called in process
with hand-made ASGI messages (tests.harness.asgi): every failure the lean path answers
itself, and what it leaves to Starlette. tests/service/test_app.py covers the same
service through starlette's TestClient."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from extender.decisions.wire import VERBS, Verb, WireError
from extender.policy.settings import Settings
from extender.service.compose import build_service
from extender.service.telemetry import Telemetry
from extender.service.verbs import INTERNAL_ERROR, Handler, VerbFront, Verbs
from tests.harness.asgi import JSON, Answer, call, call_raising, http_scope, lifespan
from tests.harness.fixtures import fixture_bytes, make_settings

VALUES = {"node-1": 0.4, "node-2": 0.7, "node-3": 0.1, "node-4": 0.1, "node-5": 0.95}
FILTER = fixture_bytes("filter-nodecache.json")


def policy(**extra: Any) -> Settings:
    return make_settings(
        static={"nodes": {n: {"cpu": v} for n, v in VALUES.items()}},
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
        **extra,
    )


@pytest.fixture
async def app() -> AsyncIterator[VerbFront]:
    """The served app of a service, its lifespan running."""
    served = build_service(policy()).app
    assert isinstance(served, VerbFront)
    async with lifespan(served):
        yield served


async def echo(body: bytes, now: float) -> bytes:
    return body


def verbs_app(
    handler: Handler = echo, settings: Settings | None = None
) -> tuple[VerbFront, Telemetry]:
    """`handler` for every verb, in front of a Starlette app with only the verbs' routes."""
    telemetry = Telemetry()
    settings = settings if settings is not None else policy(server={"maxBodyBytes": 1000})
    verbs = Verbs(settings, dict.fromkeys(VERBS, handler), telemetry, lambda: 0.0)
    return verbs.front(Starlette(routes=verbs.routes())), telemetry


def observed(telemetry: Telemetry, verb: Verb, code: int) -> float | None:
    labels = {"verb": verb, "code": str(code)}
    return telemetry.registry.get_sample_value("decice_requests_total", labels)


def assert_error(answer: Answer, status: int, message: str) -> None:
    assert answer.status == status, (answer.status, answer.body)
    assert answer.header("content-type") == "application/json"
    assert message in answer.json()["Error"], answer.json()
    assert answer.header("content-length") == str(len(answer.body))
    assert (answer.header("server-timing") or "").startswith("app;dur=")


async def test_every_verb_answers_with_json_and_server_timing(app: VerbFront) -> None:
    for verb, body in [
        ("filter", "filter-nodecache.json"),
        ("prioritize", "prioritize-nodecache.json"),
        ("preempt", "preempt-nodecache.json"),
        ("bind", "bind.json"),
    ]:
        answer = await call(app, "POST", f"/{verb}", [fixture_bytes(body)])
        assert answer.status == 200, (verb, answer.body)
        assert answer.header("content-type") == "application/json"
        assert answer.header("content-length") == str(len(answer.body))
        name, _, dur = (answer.header("server-timing") or "").partition(";dur=")
        assert name == "app" and float(dur) >= 0.0
        # One start and one body message, the body complete (ASGI: more_body false).
        assert [m["type"] for m in answer.messages] == [
            "http.response.start", "http.response.body",
        ]  # fmt: skip
        assert not answer.messages[1].get("more_body", False)
    filtered = await call(app, "POST", "/filter", [FILTER])
    assert filtered.json()["NodeNames"] == ["node-1", "node-2", "node-3", "node-4"]


async def test_the_lean_path_answers_as_the_starlette_route(app: VerbFront) -> None:
    """The same endpoint behind Starlette's route (what `front` hands on, or a server
    given the Starlette app): the same status, body and headers but the timing."""
    limited, _ = verbs_app()  # a 1,000-byte limit
    for front, chunks, headers in [
        (app, [FILTER], JSON),
        (app, [b"{not json"], JSON),
        (app, [b"{}"], {"content-type": "text/plain"}),
        (limited, [b" " * 600, b" " * 600], JSON),
    ]:
        lean = await call(front, "POST", "/filter", chunks, headers)
        routed = await call(front.app, "POST", "/filter", chunks, headers)
        assert (lean.status, lean.body) == (routed.status, routed.body)
        untimed = [h for h in lean.headers if h[0] != b"server-timing"]
        assert untimed == [h for h in routed.headers if h[0] != b"server-timing"]


async def test_a_body_in_chunks_under_the_limit_is_joined() -> None:
    front, _ = verbs_app()
    answer = await call(front, "POST", "/filter", [b'{"a":', b"", b" 1}"])
    assert answer.status == 200 and answer.body == b'{"a": 1}'


@pytest.mark.parametrize(
    ("ctype", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("Application/JSON; charset=utf-8", 200),
    ],
)
async def test_content_type_other_than_json_is_415(ctype: str, status: int) -> None:
    front, telemetry = verbs_app()
    answer = await call(front, "POST", "/prioritize", [b"{}"], {"content-type": ctype})
    assert answer.status == status
    if status == 415:
        assert_error(answer, 415, f"Content-Type must be application/json, got {ctype!r}")
    assert observed(telemetry, "prioritize", status) == 1.0


async def test_no_content_type_is_read_as_json() -> None:
    front, _ = verbs_app()
    assert (await call(front, "POST", "/filter", [b"{}"], {})).status == 200


async def test_declared_length_over_the_limit_is_413_before_reading() -> None:
    front, telemetry = verbs_app()
    answer = Answer()

    async def receive() -> Message:
        raise AssertionError("the body was read")

    async def send(message: Message) -> None:
        answer.messages.append(message)
        if message["type"] == "http.response.start":
            answer.status, answer.headers = message["status"], message["headers"]
        else:
            answer.body += message["body"]

    scope = http_scope("POST", "/filter", {**JSON, "content-length": "1001"})
    await front(scope, receive, send)
    assert_error(answer, 413, "request body exceeds server.maxBodyBytes (1000)")
    assert observed(telemetry, "filter", 413) == 1.0


async def test_streamed_body_over_the_limit_is_413_once_it_passes() -> None:
    """No Content-Length: the chunks are counted as they come, and reading stops at the
    first that goes over (the 11th of 100 bytes, the limit 1,000)."""
    front, _ = verbs_app()
    read = 0

    async def receive() -> Message:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": b" " * 100, "more_body": read < 20}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await front(http_scope("POST", "/filter"), receive, send)
    assert read == 11
    assert sent[0]["status"] == 413
    answer = await call(front, "POST", "/filter", [b" " * 100] * 20)
    assert_error(answer, 413, "maxBodyBytes (1000)")
    exact = await call(front, "POST", "/filter", [b" " * 100] * 10)
    assert exact.status == 200  # the limit itself is allowed


async def test_disconnect_before_the_whole_body_is_400() -> None:
    front, telemetry = verbs_app()
    answer = await call(front, "POST", "/bind", [b'{"PodName":'], disconnect=True)
    assert_error(answer, 400, "client disconnected before sending the whole body")
    assert observed(telemetry, "bind", 400) == 1.0


async def test_a_body_the_wire_refuses_is_400_naming_the_verb(app: VerbFront) -> None:
    answer = await call(app, "POST", "/filter", [b"{not json"])
    assert_error(answer, 400, "bad filter request: request body is not valid JSON")
    answer = await call(app, "POST", "/preempt", [b"[]"])
    assert_error(answer, 400, "bad preempt request")


async def test_an_unexpected_exception_is_a_500_then_raised_for_the_server_to_log() -> None:
    """As starlette's ServerErrorMiddleware: the client gets its 500, the exception goes on
    to the server (uvicorn logs it, "Exception in ASGI application"); telemetry counts it."""

    async def broken(body: bytes, now: float) -> bytes:
        raise RuntimeError("a bug")

    front, telemetry = verbs_app(broken)
    answer, raised = await call_raising(front, "POST", "/filter", [b"{}"], JSON)
    assert isinstance(raised, RuntimeError) and str(raised) == "a bug"
    assert_error(answer, 500, INTERNAL_ERROR)
    assert observed(telemetry, "filter", 500) == 1.0
    # Behind Starlette's route too: our 500 was sent, its middleware only re-raises.
    routed, raised = await call_raising(front.app, "POST", "/filter", [b"{}"], JSON)
    assert isinstance(raised, RuntimeError)
    assert_error(routed, 500, INTERNAL_ERROR)
    assert len(routed.messages) == 2


async def test_a_wire_error_is_not_an_unexpected_one() -> None:
    async def refusing(body: bytes, now: float) -> bytes:
        raise WireError("node list is empty")

    front, _ = verbs_app(refusing)
    answer = await call(front, "POST", "/prioritize", [b"{}"])
    assert_error(answer, 400, "bad prioritize request: node list is empty")


async def test_other_methods_and_paths_are_starlettes(app: VerbFront) -> None:
    get = await call(app, "GET", "/filter")
    assert get.status == 405 and get.body == b"Method Not Allowed"
    assert get.header("allow") == "POST"
    assert (await call(app, "PUT", "/bind", [b"{}"])).status == 405
    health = await call(app, "GET", "/healthz")
    assert health.status == 200 and health.body == b"ok\n"
    assert (await call(app, "POST", "/nowhere", [b"{}"])).status == 404
    slash = await call(app, "POST", "/filter/", [b"{}"])  # Starlette's redirect, as before
    assert slash.status == 307 and slash.header("location") == "http://127.0.0.1:8888/filter"
    assert (await call(app, "GET", "/openapi.json")).json()["paths"]["/filter"]["post"]


async def test_url_prefix_paths() -> None:
    served = build_service(policy(server={"urlPrefix": "/scheduler/"})).app
    async with lifespan(served):
        ok = await call(served, "POST", "/scheduler/filter", [FILTER])
        assert ok.status == 200 and ok.header("server-timing") is not None
        assert (await call(served, "POST", "/filter", [FILTER])).status == 404
        assert (await call(served, "GET", "/scheduler/filter")).status == 405
        assert (await call(served, "GET", "/scheduler/healthz")).status == 200


async def test_only_a_post_to_a_verb_path_skips_the_app() -> None:
    """The front hands the app everything else unchanged: lifespan, websockets, other
    methods and paths."""
    seen: list[tuple[str, str]] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((scope["type"], scope.get("method", "") + " " + scope.get("path", "")))

    verbs = Verbs(policy(), dict.fromkeys(VERBS, echo), Telemetry(), lambda: 0.0)
    front = verbs.front(inner)

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    async def drop(message: Message) -> None:
        pass

    scopes: list[Callable[[], Scope]] = [
        lambda: {"type": "lifespan"},
        lambda: {**http_scope("GET", "/filter"), "type": "websocket"},
        lambda: http_scope("GET", "/filter"),
        lambda: http_scope("POST", "/healthz"),
        lambda: http_scope("POST", "/filterx"),
        lambda: http_scope("POST", "/filter"),
    ]
    for scope in scopes:
        await front(scope(), nothing, drop)
    assert seen == [
        ("lifespan", " "),
        ("websocket", "GET /filter"),
        ("http", "GET /filter"),
        ("http", "POST /healthz"),
        ("http", "POST /filterx"),
    ]
