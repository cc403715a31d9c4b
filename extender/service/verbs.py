"""The extender verbs over raw ASGI (service.verb_asgi); every answer carries
`Server-Timing: app;dur=<ms>` (body read to answer built) to tell our cost apart."""

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
Clock = Callable[[], float]


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


class VerbEndpoint:
    """One verb as an ASGI app: content type, body limit, a 4xx naming a bad body, a 500 on
    a bug, `Server-Timing` and the latency histogram. An instance, not a function:
    Starlette's Route serves it as ASGI, without a Request or Response
    (starlette/routing.py, `Route.__init__`)."""

    __slots__ = ("_clock", "_limit", "_telemetry", "handler", "verb")

    def __init__(
        self, verb: Verb, handler: Handler, limit: int, telemetry: Telemetry, clock: Clock
    ) -> None:
        self.verb, self.handler, self._limit = verb, handler, limit
        self._telemetry, self._clock = telemetry, clock

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
            body = await read_body(receive, declared, self._limit)
            return 200, await self.handler(body, self._clock())
        except WireError as exc:
            return 400, error_body(f"bad {self.verb} request: {exc}")
        except BodyTooLarge:
            return 413, error_body(f"request body exceeds server.maxBodyBytes ({self._limit})")
        except ClientDisconnected:
            return 400, error_body("client disconnected before sending the whole body")

    async def _respond(self, send: Send, started: float, status: int, body: bytes) -> None:
        elapsed = time.perf_counter() - started
        self._telemetry.observe(self.verb, status, elapsed)
        timing = b"app;dur=%.3f" % (elapsed * 1000)
        await respond(send, status, body, [_JSON_HEADER, (b"server-timing", timing)])


class Verbs:
    """Every verb's endpoint, served through `front` or `routes`."""

    def __init__(
        self,
        settings: Settings,
        handlers: Mapping[Verb, Handler],
        telemetry: Telemetry,
        clock: Clock,
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
