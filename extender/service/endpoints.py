"""The service's other routes: health, readiness and metrics (also on the metrics
listener), and /explain and /openapi.json (beside the verbs only)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from extender.cluster.informer import WatchStatus
from extender.decisions.engine import Engine
from extender.decisions.explain import explain_pod
from extender.decisions.pods import name_problem, shown
from extender.policy.settings import Settings
from extender.service.openapi import openapi_document
from extender.service.telemetry import Telemetry
from extender.service.verbs import JSON_TYPE, error_response

_UID = re.compile(r"[A-Za-z0-9-]{1,128}")


def health_routes(
    engine: Engine,
    telemetry: Telemetry,
    clock: Callable[[], float],
    watches: Mapping[str, WatchStatus],
    problems: Sequence[str],
    details: Mapping[str, Callable[[], object]],
    base: str = "",
) -> list[Route]:
    """GET <base>/healthz, /readyz, /readyz/data and /metrics.

    /readyz means "can answer": 503 only for `problems` (bind enabled without a Kubernetes
    client). Stale or missing metric data is no reason to mark the pod NotReady: the
    scheduler beside us calls us whatever the probe says, so a NotReady pod gains nothing
    and only stalls a rollout through a Prometheus outage. The data's state is in the body
    (`dataReady`) and on /readyz/data, which answers 503 while a fail-closed metric has no
    fresh values (for monitoring and people, not for probes)."""

    async def healthz(request: Request) -> Response:
        return Response(b"ok\n", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        data_ready, detail = engine.readiness(clock())
        ready = not problems
        body: dict[str, object] = {"ready": ready, "dataReady": data_ready, "metrics": detail}
        # Not part of `ready`: a failed reload keeps serving the last valid policy, and a
        # rebalancer that does not hold the lease is a healthy standby.
        for name, detail_of in details.items():
            body[name] = detail_of()
        if problems:
            body["problems"] = list(problems)
        if watches:
            # Not part of `ready`: without a watch, filter and prioritize still answer from
            # the metrics; the herd guard then hears only of our own binds. Until the node
            # cache has synced, no verb vetoes a node on its size (state.watch_sizes).
            body["watches"] = {name: status.detail() for name, status in watches.items()}
            nodes = watches.get("nodes")
            if nodes is not None:
                body["nodeCacheSynced"] = nodes.synced
        return Response(orjson.dumps(body), 200 if ready else 503, media_type=JSON_TYPE)

    async def data_readyz(request: Request) -> Response:
        data_ready, detail = engine.readiness(clock())
        body = {"dataReady": data_ready, "metrics": detail}
        return Response(orjson.dumps(body), 200 if data_ready else 503, media_type=JSON_TYPE)

    async def metrics(request: Request) -> Response:
        return Response(telemetry.exposition(), media_type="text/plain; version=0.0.4")

    return [
        Route(f"{base}/healthz", healthz, methods=["GET"]),
        Route(f"{base}/readyz", readyz, methods=["GET"]),
        Route(f"{base}/readyz/data", data_readyz, methods=["GET"]),
        Route(f"{base}/metrics", metrics, methods=["GET"]),
    ]


def info_routes(
    settings: Settings,
    engine: Engine,
    clock: Callable[[], float],
    base: str = "",
    shadowed: Callable[[str], Mapping[str, object] | None] | None = None,
) -> list[Route]:
    """GET <base>/openapi.json and <base>/explain (with `shadowed(uid)`'s verdict, in
    shadow mode)."""

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
        return Response(orjson.dumps(doc), media_type=JSON_TYPE)

    async def openapi(request: Request) -> Response:
        return Response(orjson.dumps(openapi_document(settings)), media_type=JSON_TYPE)

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
        return Response(orjson.dumps(summary(over)), media_type=JSON_TYPE)

    return [Route("/shadow", shadow, methods=["GET"])]
