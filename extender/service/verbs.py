"""The extender verbs: filter, prioritize, preempt and bind, over HTTP.

Routes only: parsing lives in decisions.wire, decisions in decisions.engine, binding in
cluster.binder. Every verb response carries `Server-Timing: app;dur=<ms>` measured from the
start of the body read to the response built, so the scheduler-side cost can be told apart.
A verb is served on raw ASGI (extender.service.verb_asgi), not through Starlette's Request
and Response.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping

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
from extender.service.verb_asgi import (
    BodyTooLarge,
    ClientDisconnected,
    VerbFront,
    read_body,
    request_headers,
    respond,
)

JSON_TYPE = "application/json"
_JSON_HEADER = (b"content-type", JSON_TYPE.encode())
INTERNAL_ERROR = "internal error: see the extender's log"

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
    """No cyclic GC while one request is decoded, decided and dropped (no await inside).

    A full v1.NodeList of 5,000 nodes decodes into ~10^6 dicts and lists; the collector,
    triggered by their allocation, walked them (and the tables) again and again, which
    made decoding several times slower (BENCHMARKS.md, "In-process costs the code cites").
    JSON values hold no cycles, refcounting frees them all before the collector is
    switched back on, so nothing is left for it to find.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def handlers(engine: Engine, binder: Binder, telemetry: Telemetry) -> dict[Verb, Handler]:
    """What each verb does with its body: wire parses, the engine (or binder) decides, wire
    encodes."""

    async def do_filter(body: bytes, now: float) -> bytes:
        with gc_paused():
            args = parse_extender_args(body)
            decision = engine.filter(args, now)
            answer = encode_filter(args, decision)
            failed = len(decision.failed)
            passed = len(args.names) - failed
            # Dropped while the collector is off: a 5,000-node v1.NodeList still alive when it
            # comes back on is walked by the collection its allocations triggered
            # (BENCHMARKS.md, "Before and after the hygiene and explanation work").
            del args, decision
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


class Verbs:
    """Every verb behind one wrapper: the content type, the body limit, a body we cannot
    read as a 4xx naming the problem, an unexpected error as a 500, `Server-Timing` and the
    latency histogram. The handlers only turn a body into an answer; `answer` serves every
    verb, whether it came through `front` (the served path) or Starlette's `routes`."""

    def __init__(
        self,
        settings: Settings,
        handlers: Mapping[Verb, Handler],
        telemetry: Telemetry,
        clock: Callable[[], float],
    ) -> None:
        self._limit = settings.server.max_body_bytes
        self._telemetry = telemetry
        self._clock = clock
        self._endpoints = {
            path: (verb, VerbEndpoint(self.answer, verb, handlers[verb]))
            for verb, path in verb_paths(settings).items()
        }

    def routes(self) -> list[Route]:
        """POST <urlPrefix>/<verb> for every verb, to the same endpoints as `front`: what
        `front` hands on to Starlette on a verb's path (another method: 405 with Allow) is
        answered as it was."""
        return [
            Route(path, endpoint, methods=["POST"], name=verb)
            for path, (verb, endpoint) in self._endpoints.items()
        ]

    def front(self, app: ASGIApp) -> VerbFront:
        """`app` (the Starlette app with `routes`) behind a front that answers a POST to a
        verb's path itself."""
        return VerbFront({path: endpoint for path, (_, endpoint) in self._endpoints.items()}, app)

    async def answer(
        self, verb: Verb, handler: Handler, scope: Scope, receive: Receive, send: Send
    ) -> None:
        started = time.perf_counter()
        try:
            status, body = await self._outcome(verb, handler, scope, receive)
        except Exception:
            # As starlette's ServerErrorMiddleware (starlette/middleware/errors.py): a 500,
            # then the exception goes on to the server, which logs it.
            await self._respond(send, verb, started, 500, error_body(INTERNAL_ERROR))
            raise
        await self._respond(send, verb, started, status, body)

    async def _outcome(
        self, verb: Verb, handler: Handler, scope: Scope, receive: Receive
    ) -> tuple[int, bytes]:
        """(status, body) of the answer to this request."""
        ctype, declared = request_headers(scope)
        if ctype is not None:
            sent = ctype.decode("latin-1")  # as starlette's Headers
            if sent.split(";", 1)[0].strip().lower() != JSON_TYPE:
                return 415, error_body(f"Content-Type must be {JSON_TYPE}, got {sent!r:.80}")
        try:
            body = await read_body(receive, declared, self._limit)
            return 200, await handler(body, self._clock())
        except WireError as exc:
            return 400, error_body(f"bad {verb} request: {exc}")
        except BodyTooLarge:
            return 413, error_body(f"request body exceeds server.maxBodyBytes ({self._limit})")
        except ClientDisconnected:
            return 400, error_body("client disconnected before sending the whole body")

    async def _respond(
        self, send: Send, verb: Verb, started: float, status: int, body: bytes
    ) -> None:
        elapsed = time.perf_counter() - started
        self._telemetry.observe(verb, status, elapsed)
        timing = b"app;dur=%.3f" % (elapsed * 1000)
        await respond(send, status, body, [_JSON_HEADER, (b"server-timing", timing)])


class VerbEndpoint:
    """One verb as an ASGI app. An instance, not a function: Starlette's Route serves it as
    ASGI, without a Request or Response (starlette/routing.py, `Route.__init__`)."""

    __slots__ = ("_answer", "handler", "verb")

    def __init__(
        self,
        answer: Callable[[Verb, Handler, Scope, Receive, Send], Awaitable[None]],
        verb: Verb,
        handler: Handler,
    ) -> None:
        self._answer = answer
        self.verb = verb
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(self.verb, self.handler, scope, receive, send)
