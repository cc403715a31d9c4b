"""The extender verbs' routes: filter, prioritize, preempt and bind, over HTTP.

Routes only: parsing lives in decisions.wire, decisions in decisions.engine, binding in
cluster.binder. Every verb response carries `Server-Timing: app;dur=<ms>` measured from the
start of the body read to the response built, so the scheduler-side cost can be told apart.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

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

Handler = Callable[[bytes, float], Awaitable[bytes]]
"""A verb: the request body and `now` in, the answer's bytes out."""


class BodyTooLarge(Exception):
    pass


def verb_paths(settings: Settings) -> dict[Verb, str]:
    """verb -> the path we serve it on (the scheduler calls <urlPrefix>/<verb>)."""
    return {verb: f"{settings.server.url_prefix}/{verb}" for verb in VERBS}


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes before reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def error_response(status: int, message: str) -> Response:
    """An answer the scheduler reads as a failed call: `{"Error": message}`."""
    return Response(orjson.dumps({"Error": message}), status, media_type=JSON_TYPE)


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
    read as a 4xx naming the problem, `Server-Timing` and the latency histogram. The
    handlers only turn a body into an answer; one endpoint serves every verb's route."""

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
        self._by_path = {
            path: (verb, handlers[verb]) for verb, path in verb_paths(settings).items()
        }

    def routes(self) -> list[Route]:
        """POST <urlPrefix>/<verb> for every verb, all to `answer`."""
        return [
            Route(path, self.answer, methods=["POST"], name=verb)
            for path, (verb, _) in self._by_path.items()
        ]

    async def answer(self, request: Request) -> Response:
        started = time.perf_counter()
        verb, handler = self._by_path[request.scope["path"]]
        ctype = request.headers.get("content-type")
        if ctype is not None and ctype.split(";", 1)[0].strip().lower() != JSON_TYPE:
            response = error_response(415, f"Content-Type must be {JSON_TYPE}, got {ctype!r:.80}")
        else:
            try:
                body = await read_body(request, self._limit)
                response = Response(await handler(body, self._clock()), media_type=JSON_TYPE)
            except WireError as exc:
                response = error_response(400, f"bad {verb} request: {exc}")
            except BodyTooLarge:
                response = error_response(
                    413, f"request body exceeds server.maxBodyBytes ({self._limit})"
                )
            except ClientDisconnect:
                response = error_response(400, "client disconnected before sending the whole body")
        elapsed = time.perf_counter() - started
        response.headers["Server-Timing"] = f"app;dur={elapsed * 1000:.3f}"
        self._telemetry.observe(verb, response.status_code, elapsed)
        return response
