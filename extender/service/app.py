"""The service's HTTP apps: the verbs (extender.service.verbs, in front of Starlette),
health and info routes (extender.service.endpoints), and the lifespan that runs the
background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from extender.cluster.binder import Binder
from extender.cluster.informer import WatchStatus
from extender.decisions.engine import Engine
from extender.errors.causes import describe
from extender.metrics.refresher import Refresher
from extender.policy.settings import Settings
from extender.service.endpoints import health_routes, info_routes, shadow_routes
from extender.service.shadow_mode import ShadowObserver
from extender.service.telemetry import Telemetry
from extender.service.verbs import Verbs

log = logging.getLogger("decice.app")

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]
Task = Callable[[], Coroutine[object, object, None]]


@dataclass(frozen=True, slots=True)
class Apps:
    verbs: ASGIApp
    """Everything: the verbs, /explain, /openapi.json, health and metrics (server.host).
    The extender's is the Starlette app behind `Verbs.front`, which answers a POST to a
    verb itself; the other modes' is the Starlette app."""
    metrics: Starlette
    """/metrics, /healthz and /readyz only, for the metrics listener (server.metricsPort):
    the pod IP may expose these, never the verbs. No lifespan: the verbs app runs it."""


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """What runs around serving. Before the first answer: `prepare` (the watches' first
    lists), one refresh, then the refresher and the `background` tasks. After the last:
    in-flight binds drained, `stopping` (may still need the tasks), the tasks cancelled,
    `shutdown`."""

    settings: Settings
    binder: Binder
    refresher: Refresher
    background: Mapping[str, Task]
    prepare: Callable[[], Awaitable[None]] | None = None
    shutdown: Callable[[], Awaitable[None]] | None = None
    stopping: Callable[[], Awaitable[object]] | None = None

    def lifespan(self) -> Lifespan:
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            # Refresh once before serving, so the first answers use data when there is some.
            if self.prepare is not None:
                await self.prepare()
            refresher = self.refresher
            await refresher.refresh_guarded()
            tasks = [asyncio.create_task(refresher.run(), name="refresher")]
            tasks += [asyncio.create_task(run(), name=n) for n, run in self.background.items()]
            try:
                yield
            finally:
                await self._stop(tasks)

        return lifespan

    async def _stop(self, tasks: list[asyncio.Task[None]]) -> None:
        grace = self.settings.server.grace_period
        if not await self.binder.drain(grace):
            log.warning("shutdown: binds still running after the grace period")
        if self.stopping is not None:
            try:
                await asyncio.wait_for(self.stopping(), grace)
            except Exception as exc:  # a shutdown step never blocks the rest
                log.warning("shutdown: %s", describe(exc) or type(exc).__name__)
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.shutdown is not None:
            await self.shutdown()


@dataclass(frozen=True, slots=True)
class Health:
    """What /healthz, /readyz and /metrics read. `problems`: what fails whatever the
    metrics say (/readyz 503); `details`: more /readyz sections, each read when asked."""

    engine: Engine
    telemetry: Telemetry
    clock: Callable[[], float]
    watches: Mapping[str, WatchStatus] = field(default_factory=dict)
    problems: Sequence[str] = ()
    details: Mapping[str, Callable[[], object]] = field(default_factory=dict)

    def routes(self, base: str = "") -> list[Route]:
        return health_routes(
            self.engine,
            self.telemetry,
            self.clock,
            self.watches,
            self.problems,
            self.details,
            base,
        )


def extender_apps(lifecycle: Lifecycle, health: Health, verbs: Verbs) -> Apps:
    """The scheduler's extender: the verbs, /explain and /openapi.json, health and metrics
    (at / and under server.urlPrefix); the metrics listener's app beside it."""
    settings = lifecycle.settings
    routes = verbs.routes()
    for base in sorted({"", settings.server.url_prefix}):
        routes += health.routes(base) + info_routes(settings, health.engine, health.clock, base)
    apps = _apps(routes, lifecycle, health)
    return Apps(verbs.front(apps.verbs), apps.metrics)


def rebalancer_apps(lifecycle: Lifecycle, health: Health) -> Apps:
    """The rebalancer answers no scheduler: health and metrics only."""
    return _apps(health.routes(), lifecycle, health)


def shadow_apps(lifecycle: Lifecycle, health: Health, shadow: ShadowObserver) -> Apps:
    """A shadow: health, metrics, /explain (with where we would have put the pod) and
    /shadow; no verb."""
    settings, engine, clock = lifecycle.settings, health.engine, health.clock
    routes = health.routes() + info_routes(settings, engine, clock, shadowed=shadow.explain)
    return _apps(routes + shadow_routes(shadow.summary), lifecycle, health)


def _apps(routes: list[Route], lifecycle: Lifecycle, health: Health) -> Apps:
    return Apps(
        Starlette(routes=routes, lifespan=lifecycle.lifespan()),
        Starlette(routes=health.routes()),
    )
