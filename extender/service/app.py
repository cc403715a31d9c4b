"""The service's HTTP apps and the lifespan that runs the background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from extender.cluster.binder import Binder
from extender.errors.causes import describe
from extender.metrics.refresher import Refresher
from extender.policy.settings import Settings
from extender.service.endpoints import Health

log = logging.getLogger("decice.app")

Task = Callable[[], Coroutine[object, object, None]]


@dataclass(frozen=True, slots=True)
class Apps:
    verbs: ASGIApp
    """Everything, on server.host:port (the extender's behind `Verbs.front`)."""
    metrics: Starlette
    """Health and /metrics only, for server.metricsPort: the pod IP may expose these,
    never the verbs. No lifespan: the verbs app runs it."""


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

    def lifespan(self) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            if self.prepare is not None:
                await self.prepare()
            await self.refresher.refresh_guarded()  # the first answers use data if any
            tasks = [asyncio.create_task(self.refresher.run(), name="refresher")]
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


def make_apps(routes: list[Route], lifecycle: Lifecycle, health: Health) -> Apps:
    return Apps(
        Starlette(routes=routes, lifespan=lifecycle.lifespan()),
        Starlette(routes=health.routes()),
    )
