"""The service's HTTP apps: the verbs' routes (extender.service.verbs), health and info
routes (extender.service.endpoints), and the lifespan that runs the background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from starlette.applications import Starlette
from starlette.routing import Route

from extender.cluster.binder import Binder
from extender.cluster.informer import WatchStatus
from extender.decisions.engine import Engine
from extender.errors.causes import describe
from extender.metrics.refresher import Refresher
from extender.policy.settings import Settings
from extender.service.endpoints import health_routes, info_routes, shadow_routes
from extender.service.shadow_mode import ShadowObserver
from extender.service.telemetry import Telemetry
from extender.service.verbs import verb_routes

log = logging.getLogger("decice.app")

Mode = Literal["extender", "rebalance", "shadow"]
"""What the service is: the scheduler's extender, the rebalancer, or a shadow."""

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


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
    mode: Mode = "extender",
    shadow: ShadowObserver | None = None,
    stopping: Callable[[], Awaitable[object]] | None = None,
) -> Apps:
    """Routes over the parts extender.service.compose.build_service wires (use that).

    `details`: more /readyz sections, each read when asked (the policy file, the
    rebalancer). `mode` "rebalance": the first app serves health and metrics only, with the
    lifespan (the rebalancer runs the refresher and watches, and answers no scheduler);
    "shadow": health, metrics, /explain and /shadow (`shadow`'s), no verb. `stopping` runs
    on shutdown before the background tasks are cancelled (they may still be needed)."""
    lifespan = _lifespan(settings, binder, refresher, background or {}, prepare, shutdown, stopping)

    def health(base: str = "") -> list[Route]:
        return health_routes(engine, telemetry, clock, watches or {}, problems, details or {}, base)

    if mode == "rebalance":
        return Apps(Starlette(routes=health(), lifespan=lifespan), Starlette(routes=health()))
    if mode == "shadow":
        assert shadow is not None
        routes = health() + info_routes(settings, engine, clock, shadowed=shadow.explain)
        routes += shadow_routes(shadow.summary)
        return Apps(Starlette(routes=routes, lifespan=lifespan), Starlette(routes=health()))
    routes = verb_routes(settings, engine, binder, telemetry, clock)
    for base in sorted({"", settings.server.url_prefix}):
        routes += health(base) + info_routes(settings, engine, clock, base)
    return Apps(Starlette(routes=routes, lifespan=lifespan), Starlette(routes=health()))


def _lifespan(
    settings: Settings,
    binder: Binder,
    refresher: Refresher,
    background: Mapping[str, Callable[[], Coroutine[object, object, None]]],
    prepare: Callable[[], Awaitable[None]] | None,
    shutdown: Callable[[], Awaitable[None]] | None,
    stopping: Callable[[], Awaitable[object]] | None,
) -> Lifespan:
    """Before serving: prepare, refresh once, start the refresher and the background tasks;
    after: drain binds, cancel the tasks, shut down."""

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
            if stopping is not None:
                try:
                    await asyncio.wait_for(stopping(), settings.server.grace_period)
                except Exception as exc:  # a shutdown step never blocks the rest
                    log.warning("shutdown: %s", describe(exc) or type(exc).__name__)
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if shutdown is not None:
                await shutdown()

    return lifespan
