"""The service's HTTP apps: health, readiness and metrics (also on the metrics listener),
/explain and /openapi.json (beside the verbs), a shadow's /shadow, and the lifespan that
runs the background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from extender.decisions.explain import explain_pod
from extender.decisions.pods import name_problem, shown
from extender.errors.causes import describe
from extender.service.openapi import openapi_document
from extender.service.verbs import JSON_TYPE, error_response
from extender.service.watches import prepare

if TYPE_CHECKING:
    from extender.service.compose import Service

log = logging.getLogger("decice.app")


Task = Callable[[], Coroutine[object, object, None]]


@contextlib.asynccontextmanager
async def lifespan(
    service: Service, stopping: Callable[[], Awaitable[object]] | None = None
) -> AsyncIterator[None]:
    """What runs around serving. Before: the watches' first lists, one refresh, the
    refresher and the service's tasks. After: binds drained, `stopping` (may still need
    the tasks), the tasks cancelled, SIGHUP and the API client let go."""
    refresher, reloader = service.refresher, service.reloader
    await prepare(service.informers, reloader)
    await refresher.refresh_guarded()  # the first answers use data if any
    tasks = [asyncio.create_task(refresher.run(), name="refresher")]
    tasks += [asyncio.create_task(run(), name=n) for n, run in service.tasks.items()]
    try:
        yield
    finally:
        grace = service.settings.server.grace_period
        if not await service.binder.drain(grace):
            log.warning("shutdown: binds still running after the grace period")
        if stopping is not None:
            try:
                await asyncio.wait_for(stopping(), grace)
            except Exception as exc:  # a shutdown step never blocks the rest
                log.warning("shutdown: %s", describe(exc) or type(exc).__name__)
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if reloader is not None:
            reloader.triggers.remove_sighup()
        if service.kube is not None:
            await service.kube.close()


_UID = re.compile(r"[A-Za-z0-9-]{1,128}")


def _json(doc: object, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type=JSON_TYPE)


def health_routes(service: Service, base: str = "") -> list[Route]:
    """GET <base>/healthz, /readyz, /readyz/data and /metrics.

    /readyz is 503 only for the service's `problems`: the scheduler calls us whatever the
    probe says, so marking the pod NotReady for stale metrics gains nothing and stalls a
    rollout through a Prometheus outage. The data's state is in the body (`dataReady`) and
    on /readyz/data (503 while a fail-closed metric has no fresh values; not for probes)."""
    engine, clock = service.engine, service.clock
    watches = {i.status.resource: i.status for i in service.informers}

    async def healthz(request: Request) -> Response:
        return Response(b"ok\n", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        problems = service.problems
        data_ready, detail = engine.readiness(clock())
        body: dict[str, object] = {"ready": not problems, "dataReady": data_ready}
        body["metrics"] = detail
        # Not part of `ready`: a failed reload keeps the last valid policy, a rebalancer
        # without the lease is a healthy standby, and without a watch the verbs still
        # answer from the metrics.
        body.update((name, detail_of()) for name, detail_of in service.details.items())
        if problems:
            body["problems"] = list(problems)
        if watches:
            body["watches"] = {name: status.detail() for name, status in watches.items()}
            if "nodes" in watches:  # until synced, no verb vetoes a node on its size
                body["nodeCacheSynced"] = watches["nodes"].synced
        return _json(body, 503 if problems else 200)

    async def data_readyz(request: Request) -> Response:
        data_ready, detail = engine.readiness(clock())
        return _json({"dataReady": data_ready, "metrics": detail}, 200 if data_ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(service.telemetry.exposition(), media_type="text/plain; version=0.0.4")

    return [
        Route(f"{base}/healthz", healthz, methods=["GET"]),
        Route(f"{base}/readyz", readyz, methods=["GET"]),
        Route(f"{base}/readyz/data", data_readyz, methods=["GET"]),
        Route(f"{base}/metrics", metrics, methods=["GET"]),
    ]


def info_routes(
    service: Service,
    base: str = "",
    shadowed: Callable[[str], Mapping[str, object] | None] | None = None,
) -> list[Route]:
    """GET <base>/openapi.json and <base>/explain (with `shadowed(uid)`'s verdict, in
    shadow mode)."""
    settings, engine, clock = service.settings, service.engine, service.clock

    async def explain(request: Request) -> Response:
        """The last decision for one pod: ?pod=NAMESPACE/NAME or ?uid=UID."""
        query = request.query_params
        pod, uid = query.get("pod"), query.get("uid")
        if (pod is None) == (uid is None):
            return error_response(400, "give exactly one of ?pod=NAMESPACE/NAME or ?uid=UID")
        if pod is not None:
            namespace, _, name = pod.partition("/")
            problem = name_problem(namespace, namespace=True) or name_problem(name)
            if problem is not None:
                return error_response(
                    400, f"pod {shown(pod)}: expected NAMESPACE/NAME, each {problem}"
                )
            memo = engine.pods.find(namespace, name)
            who = f"pod {namespace}/{name}"
        else:
            uid = query["uid"]  # exactly one of the two was given
            if not _UID.fullmatch(uid):
                return error_response(
                    400, f"uid {shown(uid)}: expected a pod UID (letters, digits, -)"
                )
            memo = engine.pods.get(uid)
            who = f"pod with UID {uid}"
        if memo is None:
            return error_response(
                404,
                f"no decision recorded for {who}: the extender keeps the last "
                f"{settings.explain.keep_pods} pods of {sorted(settings.scheduler_names)} "
                "it was asked about, since it started",
            )
        doc = await asyncio.to_thread(explain_pod, settings, memo, clock())
        verdict = shadowed(memo.facts.uid) if shadowed is not None else None
        if verdict is not None:
            doc["shadow"] = dict(verdict)
        return _json(doc)

    async def openapi(request: Request) -> Response:
        return _json(openapi_document(settings))

    return [
        Route(f"{base}/openapi.json", openapi, methods=["GET"]),
        Route(f"{base}/explain", explain, methods=["GET"]),
    ]


def shadow_routes(summary: Callable[[Mapping[str, float] | None], object]) -> list[Route]:
    """GET /shadow: the shadow's summary; `?over=cpu=0.8,memory=0.7` sets the thresholds
    of the "share onto nodes over" figures (default: each metric's filter threshold)."""

    async def shadow(request: Request) -> Response:
        over: dict[str, float] | None = None
        text = request.query_params.get("over")
        if text is not None:
            over = {}
            for part in filter(None, text.split(",")):
                metric, _, value = part.partition("=")
                try:
                    over[metric] = float(value)
                except ValueError:
                    return error_response(
                        400, f"over: expected METRIC=NUMBER[,...], got {shown(part)}"
                    )
        return _json(summary(over))

    return [Route("/shadow", shadow, methods=["GET"])]
