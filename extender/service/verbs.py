"""The extender verbs on raw ASGI (https://asgi.readthedocs.io/en/latest/specs/www.html): a
POST to a verb's path skips Starlette's router, middleware, Request and Response
(BENCHMARKS.md, "The verbs on raw ASGI"); every answer carries `Server-Timing:
app;dur=<ms>` (body read to answer built) to tell our cost apart."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

import orjson
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from extender.cluster.binder import Binder
from extender.decisions.engine import Engine
from extender.decisions.wire import (
    VERBS,
    Verb,
    WireError,
    encode_binding_result,
    encode_filter,
    encode_preemption_result,
    encode_priorities,
    parse_binding_args,
    parse_extender_args,
    parse_preemption_args,
)
from extender.policy.settings import Settings
from extender.service.telemetry import Telemetry

JSON_TYPE = "application/json"
_JSON_HEADER = (b"content-type", JSON_TYPE.encode())
INTERNAL_ERROR = "internal error: see the extender's log"


class BodyTooLarge(Exception):
    pass


class ClientDisconnected(Exception):
    """The client went away before sending the whole body (starlette's ClientDisconnect)."""


def request_headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """(Content-Type, Content-Length) as sent, the first of each (as starlette's
    `Headers.get`); None when absent."""
    ctype = length = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            ctype = value if ctype is None else ctype
        elif name == b"content-length":
            length = value if length is None else length
    return ctype, length


async def read_body(receive: Receive, declared: bytes | None, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes before reading them all: at once
    when the declared Content-Length is over, else as soon as the chunks add up to more."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            if not message.get("more_body", False) and not chunks:
                return chunk  # all in one message, as the scheduler sends it: no copy
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnected


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """The whole answer: `headers` and Content-Length, then the body in one message."""
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass(slots=True, eq=False)
class VerbFront:
    """In front of `app` (the Starlette app): a POST to exactly one of `endpoints`' paths
    goes straight to its endpoint; everything else goes to `app` (a GET there is a 405)."""

    endpoints: Mapping[str, ASGIApp]
    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.endpoints.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)


Handler = Callable[[bytes, float], Awaitable[bytes]]
"""A verb: the request body and `now` in, the answer's bytes out."""


def verb_paths(settings: Settings) -> dict[Verb, str]:
    """verb -> the path we serve it on (the scheduler calls <urlPrefix>/<verb>)."""
    return {verb: f"{settings.server.url_prefix}/{verb}" for verb in VERBS}


def error_body(message: str) -> bytes:
    """An answer the scheduler reads as a failed call: `{"Error": message}`."""
    return orjson.dumps({"Error": message})


def error_response(status: int, message: str) -> Response:
    """`error_body` as a Starlette response, for the other endpoints."""
    return Response(error_body(message), status, media_type=JSON_TYPE)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while one request is decoded, decided and dropped (no await inside):
    a big NodeList's allocations would trigger collections that walk it and the tables
    again and again (BENCHMARKS.md). JSON holds no cycles; refcounting frees it all."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def handlers(engine: Engine, binder: Binder, telemetry: Telemetry) -> dict[Verb, Handler]:
    """What each verb does with its body."""

    async def do_filter(body: bytes, now: float) -> bytes:
        with gc_paused():
            args = parse_extender_args(body)
            decision = engine.filter(args, now)
            answer = encode_filter(args, decision)
            failed = len(decision.failed)
            passed = len(args.names) - failed
            del args, decision  # while the collector is off, or it walks them (BENCHMARKS.md)
        telemetry.filtered(passed, failed)
        return answer

    async def do_prioritize(body: bytes, now: float) -> bytes:
        with gc_paused():
            args = parse_extender_args(body, engine.answered_nodes(now))
            answer = encode_priorities(engine.prioritize(args, now))
            del args  # while the collector is off: see do_filter
        return answer

    async def do_preempt(body: bytes, now: float) -> bytes:
        with gc_paused():
            return encode_preemption_result(engine.preempt(parse_preemption_args(body), now))

    async def do_bind(body: bytes, now: float) -> bytes:
        return encode_binding_result(await binder.bind(parse_binding_args(body)))

    return {
        "filter": do_filter,
        "prioritize": do_prioritize,
        "bind": do_bind,
        "preempt": do_preempt,
    }


@dataclass(slots=True, eq=False)
class VerbEndpoint:
    """One verb as an ASGI app: content type, body limit, a 4xx naming a bad body, a 500 on
    a bug, `Server-Timing` and the latency histogram. An instance, not a function:
    Starlette's Route serves it as ASGI, without a Request or Response
    (starlette/routing.py, `Route.__init__`)."""

    verb: Verb
    handler: Handler
    limit: int
    telemetry: Telemetry
    clock: Callable[[], float]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            status, body = await self._outcome(scope, receive)
        except Exception:
            # As starlette's ServerErrorMiddleware (starlette/middleware/errors.py): a 500,
            # then the exception goes on to the server, which logs it.
            await self._respond(send, started, 500, error_body(INTERNAL_ERROR))
            raise
        await self._respond(send, started, status, body)

    async def _outcome(self, scope: Scope, receive: Receive) -> tuple[int, bytes]:
        ctype, declared = request_headers(scope)
        if ctype is not None:
            sent = ctype.decode("latin-1")  # as starlette's Headers
            if sent.split(";", 1)[0].strip().lower() != JSON_TYPE:
                return 415, error_body(f"Content-Type must be {JSON_TYPE}, got {sent!r:.80}")
        try:
            body = await read_body(receive, declared, self.limit)
            return 200, await self.handler(body, self.clock())
        except WireError as exc:
            return 400, error_body(f"bad {self.verb} request: {exc}")
        except BodyTooLarge:
            return 413, error_body(f"request body exceeds server.maxBodyBytes ({self.limit})")
        except ClientDisconnected:
            return 400, error_body("client disconnected before sending the whole body")

    async def _respond(self, send: Send, started: float, status: int, body: bytes) -> None:
        elapsed = time.perf_counter() - started
        self.telemetry.observe(self.verb, status, elapsed)
        timing = b"app;dur=%.3f" % (elapsed * 1000)
        await respond(send, status, body, [_JSON_HEADER, (b"server-timing", timing)])


class Verbs:
    """Every verb's endpoint, served through `front` or `routes`."""

    def __init__(
        self,
        settings: Settings,
        handlers: Mapping[Verb, Handler],
        telemetry: Telemetry,
        clock: Callable[[], float],
    ) -> None:
        limit = settings.server.max_body_bytes
        self._endpoints = {
            path: VerbEndpoint(verb, handlers[verb], limit, telemetry, clock)
            for verb, path in verb_paths(settings).items()
        }

    def routes(self) -> list[Route]:
        """POST <urlPrefix>/<verb>, the endpoints of `front` (another method: 405)."""
        return [
            Route(path, endpoint, methods=["POST"], name=endpoint.verb)
            for path, endpoint in self._endpoints.items()
        ]

    def front(self, app: ASGIApp) -> VerbFront:
        """`app` (Starlette with `routes`) behind a front that answers verb POSTs itself."""
        return VerbFront(self._endpoints, app)
