"""The composition root: settings in, a ready-to-serve service out, one builder per mode.

`decice-extender serve` calls `build_service` (the scheduler's extender), `rebalance`
calls `build_rebalancer`, `shadow` calls `build_shadow`; tests call them with a fake
provider or a client for the loopback API server. Nothing else builds the parts. Each
builder reads as the list of what its mode is made of, over the parts every mode shares
(extender.service.parts), and hands its background tasks to the app's lifecycle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.types import ASGIApp

from extender.cluster.binder import Binder
from extender.cluster.connect import missing_client_problems
from extender.cluster.informer import Informer
from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.cluster.requeue import Requeuer
from extender.decisions.engine import Engine
from extender.decisions.nodes import NodeCache
from extender.metrics.providers import MetricsProvider
from extender.metrics.refresher import Refresher
from extender.policy.reload import PolicyReloader
from extender.policy.settings import Settings
from extender.rebalancing.loop import Rebalancer
from extender.service import parts
from extender.service.app import (
    Apps,
    Health,
    Lifecycle,
    extender_apps,
    rebalancer_apps,
    shadow_apps,
)
from extender.service.parts import PolicyFile, SharedParts
from extender.service.rebalance_mode import for_rebalancing, rebalancer_detail
from extender.service.shadow_mode import ShadowObserver, for_shadowing
from extender.service.shadow_telemetry import ShadowTelemetry
from extender.service.telemetry import RebalanceTelemetry, Telemetry
from extender.service.verbs import Verbs, handlers
from extender.service.watches import prepare

__all__ = ["KubeAPI", "PolicyFile", "Service", "build_rebalancer", "build_service", "build_shadow"]

log = logging.getLogger("decice.service")


@dataclass(frozen=True, slots=True)
class Service:
    settings: Settings
    app: ASGIApp
    """The verbs listener's app (server.host:port); the only app of the other modes."""
    metrics_app: Starlette
    """The metrics listener's app (server.metricsHost:metricsPort), when one is set."""
    engine: Engine
    binder: Binder
    refresher: Refresher
    telemetry: Telemetry
    nodes: NodeCache
    informers: tuple[Informer, ...] = ()
    requeuer: Requeuer | None = None
    problems: tuple[str, ...] = ()
    """What keeps the service from working as configured, whatever the metrics say
    (bind enabled without a Kubernetes client): /readyz answers 503 and lists them."""
    reloader: PolicyReloader | None = None
    """Live reload of the policy file, when the service was built from one."""
    rebalancer: Rebalancer | None = None
    """The rebalancer (`build_rebalancer`)."""
    shadow: ShadowObserver | None = None
    """The placements judged (`build_shadow`)."""

    async def prepare(self) -> None:
        """What the app does before its first refresh (the CLI calls it too)."""
        await prepare(self.informers)


def build_service(
    settings: Settings,
    *,
    provider: MetricsProvider | None = None,
    kube: KubeAPI | None = None,
    kube_problem: str | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
    overload_leader: Leadership | None = None,
) -> Service:
    """The scheduler's extender: the engine, refresher, binder, watches and the verbs.

    `provider` defaults to the policy's own (Prometheus or static); `kube` None means no
    Kubernetes client: filter and prioritize work, binds answer an Error, `instance`
    labels cannot be mapped to nodes, and the herd guard hears only of our own binds.
    `kube_problem` says why a client the policy needs is missing (`open_kube`): with
    bind enabled, that is logged at ERROR and /readyz answers 503 naming it.
    The first refresh runs when the app starts. With `policy_file`, a change of that
    file or SIGHUP reloads its policies (extender.policy.reload). With
    `overload.enabled`, the extender writes overload taints while `overload_leader` (an
    elector on its own Lease) holds it (extender.cluster.overload).
    """
    shared = parts.shared_parts(settings, kube, clock)
    refresher = parts.refresher(shared, provider)
    placed, event_tasks = parts.placement_events(shared)
    binder = _binder(shared, placed)
    informers, watch_tasks = parts.watches(shared, binder.binding, placed)
    reloader, reload_tasks = parts.reloader(shared, policy_file, settings, refresher)
    tainter, taint_tasks, taint_details = parts.tainter(shared, overload_leader)
    problems = missing_client_problems(settings, kube_problem) if kube is None else ()
    lifecycle = Lifecycle(
        settings,
        binder,
        refresher,
        {**event_tasks, **watch_tasks, **reload_tasks, **taint_tasks},
        prepare=lambda: prepare(informers, reloader),
        shutdown=parts.shutdown(kube, reloader),
        stopping=tainter.remove_all if tainter is not None else None,
    )
    details = {**parts.details(shared, reloader), **taint_details}
    health = _health(shared, informers, details, problems)
    verbs = Verbs(
        settings, handlers(shared.engine, binder, shared.telemetry), shared.telemetry, clock
    )
    apps = extender_apps(lifecycle, health, verbs)
    return _service(shared, apps, binder, refresher, informers, reloader, problems=problems)


def build_rebalancer(
    settings: Settings,
    *,
    leader: Leadership,
    kube: KubeAPI | None,
    kube_problem: str | None = None,
    provider: MetricsProvider | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
) -> Service:
    """The rebalancer (`decice-extender rebalance`): the extender's refresher, engine and
    watches, no verbs, and the rebalancer acting while `leader` (an elector on its Lease)
    holds it. Events on placed pods, requeue patches and taints stay the extender's."""
    if kube is None:
        raise ValueError(f"the rebalancer needs a Kubernetes client: {kube_problem}")
    shared = parts.shared_parts(for_rebalancing(settings), kube, clock)
    refresher = parts.refresher(shared, provider)
    placed, event_tasks = parts.placement_events(shared)
    binder = _binder(shared, placed)
    informers, watch_tasks = parts.watches(shared, binder.binding, placed)
    reloader, reload_tasks = parts.reloader(shared, policy_file, settings, refresher)
    engine, nodes = shared.engine, shared.nodes
    counters = RebalanceTelemetry(shared.telemetry.registry, lambda: leader.is_leader)
    rebalancer = Rebalancer(
        engine, kube, leader, counters, lambda: nodes.inventory().cpu_cores, clock
    )
    tasks = {**event_tasks, **watch_tasks, **reload_tasks}
    tasks.update(leader=leader.run, rebalance=rebalancer.run)
    lifecycle = Lifecycle(
        shared.settings,
        binder,
        refresher,
        tasks,
        prepare=lambda: prepare(informers, reloader),
        shutdown=parts.shutdown(kube, reloader),
    )
    details = parts.details(shared, reloader)
    details["rebalancer"] = lambda: rebalancer_detail(engine.settings, leader, rebalancer)
    apps = rebalancer_apps(lifecycle, _health(shared, informers, details))
    return _service(shared, apps, binder, refresher, informers, reloader, rebalancer=rebalancer)


def build_shadow(
    settings: Settings,
    *,
    kube: KubeAPI | None,
    kube_problem: str | None = None,
    provider: MetricsProvider | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
) -> Service:
    """A shadow (`decice-extender shadow`): the extender's refresher, engine and watches,
    judging every placement the pod watch sees (extender.service.shadow_mode), with no
    verbs and nothing written to the API."""
    if kube is None:
        raise ValueError(f"shadow mode needs a Kubernetes client: {kube_problem}")
    if settings.overload.enabled:
        log.info("shadow mode writes nothing: overload.enabled is ignored here")
    shared = parts.shared_parts(for_shadowing(settings), kube, clock)
    counters = ShadowTelemetry(shared.telemetry.registry)
    observer = ShadowObserver(shared.engine, shared.nodes, counters)
    counters.watch_exceedance(observer.exceedance_counts)
    refresher = parts.refresher(shared, provider, observer.installed)
    placed, event_tasks = parts.placement_events(shared)
    binder = _binder(shared, placed)
    informers, watch_tasks = parts.watches(shared, binder.binding, placed, observer)
    reloader, reload_tasks = parts.reloader(shared, policy_file, settings, refresher)
    lifecycle = Lifecycle(
        shared.settings,
        binder,
        refresher,
        {**event_tasks, **watch_tasks, **reload_tasks},
        prepare=lambda: prepare(informers, reloader),
        shutdown=parts.shutdown(kube, reloader),
    )
    health = _health(shared, informers, parts.details(shared, reloader))
    apps = shadow_apps(lifecycle, health, observer)
    return _service(shared, apps, binder, refresher, informers, reloader, shadow=observer)


def _binder(shared: SharedParts, placed: Callable[[str], None]) -> Binder:
    return Binder(
        shared.settings,
        shared.engine,
        shared.kube,
        clock=shared.clock,
        on_outcome=shared.telemetry.bound,
        on_placed=placed,
    )


def _health(
    shared: SharedParts,
    informers: tuple[Informer, ...],
    details: parts.Details,
    problems: tuple[str, ...] = (),
) -> Health:
    return Health(
        shared.engine,
        shared.telemetry,
        shared.clock,
        parts.watch_status(informers),
        problems,
        details,
    )


def _service(
    shared: SharedParts,
    apps: Apps,
    binder: Binder,
    refresher: Refresher,
    informers: tuple[Informer, ...],
    reloader: PolicyReloader | None,
    *,
    problems: tuple[str, ...] = (),
    rebalancer: Rebalancer | None = None,
    shadow: ShadowObserver | None = None,
) -> Service:
    return Service(
        shared.settings,
        apps.verbs,
        apps.metrics,
        shared.engine,
        binder,
        refresher,
        shared.telemetry,
        shared.nodes,
        informers,
        shared.requeuer,
        problems=problems,
        reloader=reloader,
        rebalancer=rebalancer,
        shadow=shadow,
    )
