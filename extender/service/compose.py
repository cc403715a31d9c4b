"""The composition root: settings in, a ready-to-serve service out, one builder per mode
(`serve`, `rebalance`, `shadow`), each the parts every mode shares (`Service`) plus its own.
Nothing else builds the parts; tests call the builders with fakes.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp

from extender.cluster.binder import Binder
from extender.cluster.connect import missing_client_problems
from extender.cluster.event_poster import EventPoster
from extender.cluster.informer import Informer
from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.cluster.nodewatch import NodeEventHandler
from extender.cluster.overload import Tainter, tainted_nodes
from extender.cluster.podwatch import PodEventHandler
from extender.cluster.requeue import Requeuer
from extender.decisions.assignments import Assigned
from extender.decisions.engine import Engine, node_figures
from extender.decisions.model import Snapshot
from extender.decisions.nodes import NodeCache
from extender.decisions.turnedaway import TurnedAwayPods
from extender.metrics.heap import HEAP
from extender.metrics.providers import MetricsProvider, provider_for
from extender.metrics.refresher import Refresher
from extender.policy.reload import PolicyReloader, effective
from extender.policy.settings import Settings
from extender.rebalancing.loop import Rebalancer
from extender.service.app import Task, health_routes, info_routes, lifespan, shadow_routes
from extender.service.shadow_mode import ShadowObserver, for_shadowing
from extender.service.telemetry import (
    OverloadTelemetry,
    PlacementFigures,
    RebalanceTelemetry,
    ShadowTelemetry,
    Telemetry,
)
from extender.service.verbs import Verbs, handlers
from extender.service.watches import ignore_pod, node_informer, pod_informer, prepare

__all__ = ["KubeAPI", "PolicyFile", "Service", "build_rebalancer", "build_service", "build_shadow"]

log = logging.getLogger("decice.service")


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """Where the policy came from, for live reload (loading.read_policy gives the hash)."""

    path: Path
    environ: Mapping[str, str]
    """The overrides read at start (PROMETHEUS_URL, KUBECONFIG), applied on reload too."""
    sha256: str
    """sha256 of the bytes the running Settings were read from."""


class Service:
    """A service ready to serve: the parts every mode has (engine, node cache, requeuer,
    metrics; then the refresher, Event poster, binder, watches and live reload), with their
    tasks and /readyz sections, and what its builder adds."""

    app: ASGIApp
    """The verbs listener's app (server.host:port); the only app of the other modes."""
    metrics_app: Starlette
    """The metrics listener's app (server.metricsHost:metricsPort), when one is set."""
    refresher: Refresher
    binder: Binder
    informers: tuple[Informer, ...]
    reloader: PolicyReloader | None
    problems: tuple[str, ...] = ()
    """What keeps the service from working as configured (/readyz answers 503)."""
    rebalancer: Rebalancer | None = None
    shadow: ShadowObserver | None = None

    def __init__(
        self, settings: Settings, kube: KubeAPI | None, clock: Callable[[], float]
    ) -> None:
        self.settings, self.kube, self.clock = settings, kube, clock
        self.telemetry = telemetry = Telemetry()
        requeue = settings.requeue
        requeue_on = kube is not None and settings.kubernetes.watch_pods and requeue.enabled
        turned_away = TurnedAwayPods(requeue.max_pods, requeue.keep_seconds) if requeue_on else None
        metrics = (m.name for m in settings.fetched_metrics)
        self.engine = engine = Engine(settings, Snapshot.empty(metrics), clock(), turned_away)
        telemetry.watch(lambda: engine.snapshot, clock)
        if settings.explain.node_metrics:
            telemetry.watch_nodes(lambda: node_figures(engine, clock()))
        self.requeuer = (
            Requeuer(settings, kube, telemetry.requeued, clock) if requeue_on and kube else None
        )
        self.nodes = NodeCache()
        self.tasks: dict[str, Task] = {}
        self.details: dict[str, Callable[[], object]] = {}

    def wire(
        self,
        provider: MetricsProvider | None,
        policy_file: PolicyFile | None,
        as_read: Settings,
        shadow: ShadowObserver | None = None,
    ) -> None:
        """`as_read`: what the policy file said at start (a reload compares with it);
        `shadow` hears every snapshot and every placement the pod watch sees."""
        engine, requeuer, clock, kube = self.engine, self.requeuer, self.clock, self.kube
        settings = self.settings

        def installed(snapshot: Snapshot) -> None:
            if requeuer is not None:  # a pod turned away may fit now
                requeuer.recovered(engine.recovered(clock()), snapshot.taken_at)
            if shadow is not None:
                shadow.exceedances.installed(snapshot)

        inventory = self.nodes.inventory if kube is not None else None
        provider = provider if provider is not None else provider_for(settings)
        self.refresher = Refresher(
            settings, engine, provider, inventory, self.telemetry.refreshed, clock, installed, HEAP
        )
        placed: Callable[[str], None] = ignore_pod
        if settings.explain.events and kube is not None:
            poster = EventPoster(settings, engine.pods, kube, self.telemetry.event, clock)
            placed, self.tasks["events"] = poster.placed, poster.run
        self.binder = Binder(settings, engine, kube, clock, self.telemetry.bound, placed)
        self.informers = self._watches(placed, shadow)
        self.reloader = None
        if policy_file is not None:
            refresher = self.refresher

            async def apply(new: Settings) -> None:
                # The first refresh with the new metrics installs the new policies with it.
                await refresher.refresh_once(effective(engine.settings, new))

            self.reloader = PolicyReloader(
                policy_file.path, policy_file.environ, as_read, policy_file.sha256, apply, clock
            )
            self.telemetry.watch_config(self.reloader.figures)
            self.tasks["policy-watch"] = self.reloader.triggers.watch
        self.details["policy"] = self._policy_detail
        self.details["herdGuard"] = lambda: engine.guard.detail(engine.snapshot, clock())

    def _watches(
        self, placed: Callable[[str], None], seen: Callable[[Assigned, Any, float], None] | None
    ) -> tuple[Informer, ...]:
        """The node watch, and the pod watch feeding the herd guard, requeue and (`seen`)
        the shadow."""
        settings, kube, engine, requeuer = self.settings, self.kube, self.engine, self.requeuer
        informers: list[Informer] = []
        if kube is not None:
            engine.watch_sizes(self.clock())  # node sizes come from the node watch now

            def changed(now: float) -> None:  # a node new, resized or gone: one may fit now
                if requeuer is not None:
                    requeuer.recovered(engine.recovered(now), now)

            nodes = NodeEventHandler(self.nodes, engine, changed=changed, clock=self.clock)
            restarted = self.telemetry.watch_restart
            informers.append(node_informer(settings, kube, nodes, restarted))
            if settings.kubernetes.watch_pods or seen is not None:
                handler = PodEventHandler(
                    engine,
                    forget=requeuer.forget if requeuer is not None else ignore_pod,
                    placed=placed,
                    binding=self.binder.binding,
                    seen=seen,
                    clock=self.clock,
                )
                informers.append(pod_informer(settings, kube, handler, restarted, self.clock))
        self.tasks.update((f"watch-{i.status.resource}", i.run) for i in informers)
        if requeuer is not None:
            self.tasks["requeue"] = requeuer.run

        def placement() -> PlacementFigures:
            by_source = Counter(r.source for r in engine.reservations.values())
            waiting = len(engine.turned_away) if engine.turned_away is not None else 0
            pending = requeuer.pending if requeuer is not None else 0
            watching = {i.status.resource: i.status.watching for i in informers}
            return by_source, waiting, pending, watching

        self.telemetry.watch_placement(placement, lambda: engine.guard.estimates)
        return tuple(informers)

    def _policy_detail(self) -> dict[str, object]:
        settings = self.engine.settings
        reloaded = self.reloader.detail() if self.reloader is not None else {}
        return {
            "policies": list(settings.policy_map),
            "defaultPolicy": settings.default.name,
            **reloaded,
        }

    def serving(
        self, routes: list[Route], stopping: Callable[[], Awaitable[object]] | None = None
    ) -> Service:
        """The apps: `routes` with the lifespan; health and metrics on the metrics listener
        (the pod IP may expose these, never the verbs)."""
        self.app = Starlette(routes=routes, lifespan=lambda app: lifespan(self, stopping))
        self.metrics_app = Starlette(routes=health_routes(self))
        return self

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

    `provider` defaults to the policy's own. Without `kube`, binds answer an Error and the
    herd guard hears only of our own binds; `kube_problem` says why (with bind enabled,
    logged at ERROR and /readyz answers 503 naming it). With `policy_file`, a change of
    it or SIGHUP reloads its policies; with `overload.enabled`, taints are written while
    `overload_leader` (an elector on its own Lease) holds it."""
    service = Service(settings, kube, clock)
    service.wire(provider, policy_file, settings)
    tainter = None
    if settings.overload.enabled and (kube is None or overload_leader is None):
        log.warning("overload.enabled but no Kubernetes client or Lease: no taints")
    elif settings.overload.enabled and kube is not None and overload_leader is not None:
        nodes = service.nodes
        counter = OverloadTelemetry(service.telemetry.registry, lambda: len(tainted_nodes(nodes)))
        count = counter.overload_changed
        tainter = Tainter(service.engine, nodes, kube, overload_leader, count, clock)
        service.tasks.update({"overload-leader": overload_leader.run, "overload": tainter.run})
        service.details["overload"] = tainter.detail
    if kube is None:
        service.problems = missing_client_problems(settings, kube_problem)
    telemetry = service.telemetry
    verbs = Verbs(settings, handlers(service.engine, service.binder, telemetry), telemetry, clock)
    routes = verbs.routes()
    for base in sorted({"", settings.server.url_prefix}):
        routes += health_routes(service, base) + info_routes(service, base)
    service.serving(routes, tainter.remove_all if tainter is not None else None)
    service.app = verbs.front(service.app)
    return service


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
    """The rebalancer: no verbs, and the rebalancer acting while `leader` (an elector on
    its Lease) holds it. Events, requeue patches and taints stay the extender's."""
    if kube is None:
        raise ValueError(f"the rebalancer needs a Kubernetes client: {kube_problem}")
    view = settings.model_copy(
        update={
            "explain": settings.explain.model_copy(update={"events": False}),
            "requeue": settings.requeue.model_copy(update={"enabled": False}),
        }
    )
    service = Service(view, kube, clock)
    service.wire(provider, policy_file, settings)
    engine, nodes = service.engine, service.nodes
    counters = RebalanceTelemetry(service.telemetry.registry, lambda: leader.is_leader)
    rebalancer = Rebalancer(
        engine, kube, leader, counters, lambda: nodes.inventory().cpu_cores, clock
    )
    service.tasks.update(leader=leader.run, rebalance=rebalancer.run)

    def detail() -> dict[str, object]:
        """The mode, the lease, and what the last check decided."""
        out: dict[str, object] = {"mode": engine.settings.rebalance.mode, "leader": leader.detail()}
        if (last := rebalancer.last) is not None:
            counts = dict(Counter(d.outcome for d in last.decisions))
            out["lastCheck"] = {
                "decisions": counts,
                "protected": dict(last.skipped),
                "waiting": last.waiting,
            }
        return out

    service.details["rebalancer"] = detail
    service.rebalancer = rebalancer
    return service.serving(health_routes(service))


def build_shadow(
    settings: Settings,
    *,
    kube: KubeAPI | None,
    kube_problem: str | None = None,
    provider: MetricsProvider | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
) -> Service:
    """A shadow: judging every placement the pod watch sees (extender.service.shadow_mode),
    with no verbs and nothing written to the API."""
    if kube is None:
        raise ValueError(f"shadow mode needs a Kubernetes client: {kube_problem}")
    if settings.overload.enabled:
        log.info("shadow mode writes nothing: overload.enabled is ignored here")
    service = Service(for_shadowing(settings), kube, clock)
    counters = ShadowTelemetry(service.telemetry.registry)
    observer = ShadowObserver(service.engine, service.nodes, counters.judged)
    counters.watch_exceedance(observer.exceedance_counts)
    service.wire(provider, policy_file, settings, observer)
    routes = health_routes(service) + info_routes(service, shadowed=observer.explain)
    service.shadow = observer
    return service.serving(routes + shadow_routes(observer.summary))
