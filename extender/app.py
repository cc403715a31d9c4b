"""HTTP routes: the extender verbs, health, readiness and the service's own metrics.

Routes only: parsing lives in wire.py, decisions in engine.py, binding in binding.py.
Every verb response carries `Server-Timing: app;dur=<ms>` measured from the start of
the body read to the response built, so the scheduler-side cost can be told apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import re
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from extender.binding import Binder
from extender.config import Settings
from extender.engine import Engine
from extender.explain import explain_pod
from extender.informer import WatchStatus
from extender.openapi import openapi_document
from extender.pods import name_problem, shown
from extender.refresher import Refresher
from extender.telemetry import Telemetry
from extender.wire import (
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

log = logging.getLogger("decice.app")

JSON_TYPE = "application/json"
_UID = re.compile(r"[A-Za-z0-9-]{1,128}")


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


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"Error": message}), status, media_type=JSON_TYPE)


Handler = Callable[[bytes, float], Awaitable[bytes]]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while one request is decoded, decided and dropped (no await inside).

    A full v1.NodeList of 5,000 nodes decodes into ~10^6 dicts and lists; the collector,
    triggered by their allocation, walked them (and the tables) again and again: 200 ms
    instead of 80 ms to decode 10 MB. JSON values hold no cycles, refcounting frees them
    all before the collector is switched back on, so nothing is left for it to find.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True, slots=True)
class Apps:
    verbs: Starlette
    """Everything: the verbs, /explain, /openapi.json, health and metrics (server.host)."""
    metrics: Starlette
    """/metrics, /healthz and /readyz only, for the metrics listener (server.metricsPort):
    the pod IP may expose these, never the verbs. No lifespan: the verbs app runs it."""


def create_apps(
    settings: Settings,
    engine: Engine,
    binder: Binder,
    telemetry: Telemetry,
    refresher: Refresher,
    clock: Callable[[], float] = time.time,
    background: Mapping[str, Callable[[], Coroutine[object, object, None]]] | None = None,
    watches: Mapping[str, WatchStatus] | None = None,
    prepare: Callable[[], Awaitable[None]] | None = None,
    shutdown: Callable[[], Awaitable[None]] | None = None,
    problems: Sequence[str] = (),
    details: Mapping[str, Callable[[], object]] | None = None,
    verbs: bool = True,
) -> Apps:
    """Routes over the parts extender.service.build_service wires (use that, not this).

    `details`: more /readyz sections, each read when asked (the policy file, the
    rebalancer). `verbs` False: the first app serves health and metrics only, with the
    lifespan (the rebalancer runs the refresher and watches, and answers no scheduler)."""
    limit = settings.server.max_body_bytes
    paths = verb_paths(settings)
    background = background or {}
    watches = watches or {}

    def verb_route(verb: Verb, handler: Handler) -> Route:
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            ctype = request.headers.get("content-type")
            if ctype is not None and ctype.split(";", 1)[0].strip().lower() != JSON_TYPE:
                response = _error(415, f"Content-Type must be {JSON_TYPE}, got {ctype!r:.80}")
            else:
                try:
                    body = await read_body(request, limit)
                    response = Response(await handler(body, clock()), media_type=JSON_TYPE)
                except WireError as exc:
                    response = _error(400, f"bad {verb} request: {exc}")
                except BodyTooLarge:
                    response = _error(413, f"request body exceeds server.maxBodyBytes ({limit})")
                except ClientDisconnect:
                    response = _error(400, "client disconnected before sending the whole body")
            elapsed = time.perf_counter() - started
            response.headers["Server-Timing"] = f"app;dur={elapsed * 1000:.3f}"
            telemetry.observe(verb, response.status_code, elapsed)
            return response

        return Route(paths[verb], endpoint, methods=["POST"], name=verb)

    async def do_filter(body: bytes, now: float) -> bytes:
        with gc_paused():
            args = parse_extender_args(body)
            decision = engine.filter(args, now)
            answer = encode_filter(args, decision)
            failed = len(decision.failed)
            passed = len(args.names) - failed
            # Dropped while the collector is off: a 5,000-node v1.NodeList still alive when it
            # comes back on is walked by the collection its allocations triggered (+90 ms).
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

    async def healthz(request: Request) -> Response:
        return Response(b"ok\n", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        ready, detail = engine.readiness(clock())
        # `problems`: what fails whatever the metrics say (bind enabled without a
        # Kubernetes client). Filter and prioritize still answer; the pod is not Ready.
        ready = ready and not problems
        body: dict[str, object] = {"ready": ready, "metrics": detail}
        # Not part of `ready`: a failed reload keeps serving the last valid policy, and a
        # rebalancer that does not hold the lease is a healthy standby.
        for name, detail_of in (details or {}).items():
            body[name] = detail_of()
        if problems:
            body["problems"] = list(problems)
        if watches:
            # Not part of `ready`: without a watch, filter and prioritize still answer from
            # the metrics; the herd guard then hears only of our own binds.
            body["watches"] = {name: status.detail() for name, status in watches.items()}
        return Response(orjson.dumps(body), 200 if ready else 503, media_type=JSON_TYPE)

    async def metrics(request: Request) -> Response:
        return Response(telemetry.exposition(), media_type="text/plain; version=0.0.4")

    async def explain(request: Request) -> Response:
        """The last decision for one pod: ?pod=NAMESPACE/NAME or ?uid=UID."""
        query = request.query_params
        pod, uid = query.get("pod"), query.get("uid")
        if (pod is None) == (uid is None):
            return _error(400, "give exactly one of ?pod=NAMESPACE/NAME or ?uid=UID")
        if pod is not None:
            namespace, _, name = pod.partition("/")
            problem = name_problem(namespace, namespace=True) or name_problem(name)
            if problem is not None:
                return _error(400, f"pod {shown(pod)}: expected NAMESPACE/NAME, each {problem}")
            memo = engine.pods.find(namespace, name)
            who = f"pod {namespace}/{name}"
        else:
            uid = query["uid"]  # exactly one of the two was given
            if not _UID.fullmatch(uid):
                return _error(400, f"uid {shown(uid)}: expected a pod UID (letters, digits, -)")
            memo = engine.pods.get(uid)
            who = f"pod with UID {uid}"
        if memo is None:
            return _error(
                404,
                f"no decision recorded for {who}: the extender keeps the last "
                f"{settings.explain.keep_pods} pods of {sorted(settings.scheduler_names)} "
                "it was asked about, since it started",
            )
        doc = await asyncio.to_thread(explain_pod, settings, memo, clock())
        return Response(orjson.dumps(doc), media_type=JSON_TYPE)

    async def openapi(request: Request) -> Response:
        return Response(orjson.dumps(openapi_document(settings)), media_type=JSON_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Refresh once before serving, so the first answers use data when there is some.
        if prepare is not None:
            await prepare()
        await refresher.refresh_guarded()
        tasks = [asyncio.create_task(refresher.run(), name="refresher")]
        tasks += [asyncio.create_task(run(), name=name) for name, run in background.items()]
        try:
            yield
        finally:
            if not await binder.drain(settings.server.grace_period):
                log.warning("shutdown: binds still running after the grace period")
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if shutdown is not None:
                await shutdown()

    prefix = settings.server.url_prefix
    handlers: dict[Verb, Handler] = {
        "filter": do_filter,
        "prioritize": do_prioritize,
        "bind": do_bind,
        "preempt": do_preempt,
    }
    health = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    if not verbs:
        return Apps(Starlette(routes=health, lifespan=lifespan), Starlette(routes=health))
    routes = [verb_route(verb, handlers[verb]) for verb in VERBS]
    for base in sorted({"", prefix}):
        routes += [
            Route(f"{base}/healthz", healthz, methods=["GET"]),
            Route(f"{base}/readyz", readyz, methods=["GET"]),
            Route(f"{base}/metrics", metrics, methods=["GET"]),
            Route(f"{base}/openapi.json", openapi, methods=["GET"]),
            Route(f"{base}/explain", explain, methods=["GET"]),
        ]
    return Apps(Starlette(routes=routes, lifespan=lifespan), Starlette(routes=health))
