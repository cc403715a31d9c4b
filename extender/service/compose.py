"""The composition root: settings in, a ready-to-serve stack out.

`serve` calls `build_service(settings, kube=open_kube(settings).client)`; tests call it
with a fake provider or a client for the loopback API server. Nothing else builds the
parts. `build_service` reads as the list of what the service is made of; each step below
builds one part and registers its background task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from starlette.applications import Starlette

from extender.cluster.binder import Binder, KubeBinder
from extender.cluster.connect import missing_client_problems
from extender.cluster.event_poster import EventPoster, EventSink
from extender.cluster.informer import Informer
from extender.cluster.nodewatch import NodeEventHandler
from extender.cluster.overload import Tainter, tainted_nodes
from extender.cluster.podwatch import PodEventHandler
from extender.cluster.requeue import PodAnnotator, Requeuer
from extender.cluster.taints import TaintAPI
from extender.decisions.engine import Engine, node_figures
from extender.decisions.model import Snapshot
from extender.decisions.nodes import NodeCache
from extender.decisions.turnedaway import TurnedAwayPods
from extender.metrics.providers import MetricsProvider, provider_for
from extender.metrics.refresher import Refresher
from extender.policy.reload import PolicyReloader, effective
from extender.policy.settings import Settings
from extender.rebalancing.loop import RebalanceAPI, Rebalancer
from extender.service.app import create_apps
from extender.service.rebalance_mode import Elector, for_rebalancing, rebalancer_detail
from extender.service.shadow_mode import ShadowObserver, for_shadowing
from extender.service.telemetry import (
    OverloadTelemetry,
    PlacementFigures,
    RebalanceTelemetry,
    ShadowTelemetry,
    Telemetry,
)
from extender.service.watches import Lister, ignore_pod, node_informer, pod_informer, prepare

log = logging.getLogger("decice.service")

Task = Callable[[], Coroutine[object, object, None]]


class KubeAPI(KubeBinder, EventSink, Lister, PodAnnotator, RebalanceAPI, TaintAPI, Protocol):
    """What the service asks of the Kubernetes API (extender.cluster.client.KubeClient)."""

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """Where the policy came from, for live reload (reload.read_policy gives the hash)."""

    path: Path
    environ: Mapping[str, str]
    """The overrides read at start (PROMETHEUS_URL, KUBECONFIG), applied on reload too."""
    sha256: str
    """sha256 of the bytes the running Settings were read from."""


@dataclass(frozen=True, slots=True)
class Service:
    settings: Settings
    app: Starlette
    """The verbs listener's app (server.host:port)."""
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
    """The rebalancer, in rebalance mode (`build_service(leader=...)`)."""
    shadow: ShadowObserver | None = None
    """The placements judged, in shadow mode (`build_service(shadow=True)`)."""

    async def prepare(self) -> None:
        """What the app does before its first refresh (the CLI calls it too)."""
        await prepare(self.informers)


@dataclass(slots=True)
class _Parts:
    """What the steps of build_service share while they build the service."""

    settings: Settings
    kube: KubeAPI | None
    clock: Callable[[], float]
    telemetry: Telemetry
    engine: Engine
    nodes: NodeCache
    requeuer: Requeuer | None
    background: dict[str, Task]


def build_service(
    settings: Settings,
    *,
    provider: MetricsProvider | None = None,
    kube: KubeAPI | None = None,
    kube_problem: str | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
    leader: Elector | None = None,
    shadow: bool = False,
    overload_leader: Elector | None = None,
) -> Service:
    """The engine, refresher, binder, watches and app for `settings`.

    `provider` defaults to the policy's own (Prometheus or static); `kube` None means no
    Kubernetes client: filter and prioritize work, binds answer an Error, `instance`
    labels cannot be mapped to nodes, and the herd guard hears only of our own binds.
    `kube_problem` says why a client the policy needs is missing (`open_kube`): with
    bind enabled, that is logged at ERROR and /readyz answers 503 naming it.
    The first refresh runs when the app starts. With `policy_file`, a change of that
    file or SIGHUP reloads its policies (extender.policy.reload).

    `leader` (an elector on the rebalancer's Lease) builds the rebalance mode instead: the
    same refresher, engine and watches, no verbs, and the rebalancer acting while `leader`
    holds the Lease. Events on placed pods and requeue patches stay the extender's.
    `shadow` builds the shadow mode: the same again, judging the placements the pod watch
    sees (extender.service.shadow_mode), with no verbs and nothing written to the API.
    With `overload.enabled`, the extender writes overload taints while `overload_leader`
    (an elector on its own Lease) holds it (extender.cluster.overload).
    """
    as_read = settings  # what the file says: a reload compares the new file with it
    if leader is not None or shadow:
        if kube is None:
            what = "the rebalancer" if leader is not None else "shadow mode"
            raise ValueError(f"{what} needs a Kubernetes client: {kube_problem}")
        settings = for_rebalancing(settings) if leader is not None else for_shadowing(settings)
    problems = missing_client_problems(settings, kube_problem) if kube is None else ()
    parts = _core(settings, kube, clock)
    refresher = _refresher(parts, provider)
    on_placed = _placement_events(parts)
    binder = Binder(
        settings,
        parts.engine,
        kube,
        clock=clock,
        on_outcome=parts.telemetry.bound,
        on_placed=on_placed,
    )
    observer = (
        ShadowObserver(parts.engine, parts.nodes, ShadowTelemetry(parts.telemetry.registry))
        if shadow
        else None
    )
    informers = _watches(parts, binder, on_placed, observer)
    reloader = _reloader(parts, policy_file, as_read, refresher)
    details: dict[str, Callable[[], object]] = {
        "policy": lambda: _policy_detail(parts.engine.settings, reloader),
        "herdGuard": lambda: parts.engine.guard.detail(parts.engine.snapshot, clock()),
    }
    rebalancer = _rebalancer(parts, leader, details)
    # The extender alone writes taints: a rebalancer shares its policy, a shadow writes nothing.
    tainter = _tainter(parts, overload_leader, details) if leader is None and not shadow else None
    if shadow and settings.overload.enabled:
        log.info("shadow mode writes nothing: overload.enabled is ignored here")
    apps = create_apps(
        settings,
        parts.engine,
        binder,
        parts.telemetry,
        refresher,
        clock,
        parts.background,
        watches={i.status.resource: i.status for i in informers},
        prepare=lambda: prepare(informers, reloader),
        shutdown=lambda: _shutdown(kube, reloader),
        stopping=tainter.remove_all if tainter is not None else None,
        problems=problems,
        details=details,
        mode="rebalance" if leader is not None else "shadow" if shadow else "extender",
        shadow=observer,
    )
    return Service(
        settings,
        apps.verbs,
        apps.metrics,
        parts.engine,
        binder,
        refresher,
        parts.telemetry,
        parts.nodes,
        informers,
        parts.requeuer,
        problems=problems,
        reloader=reloader,
        rebalancer=rebalancer,
        shadow=observer,
    )


def _core(settings: Settings, kube: KubeAPI | None, clock: Callable[[], float]) -> _Parts:
    """The engine (and what it remembers of turned-away pods), the node cache, the requeuer
    and the service's own metrics."""
    telemetry = Telemetry()
    requeue_on = kube is not None and settings.kubernetes.watch_pods and settings.requeue.enabled
    turned_away = (
        TurnedAwayPods(settings.requeue.max_pods, settings.requeue.keep_seconds)
        if requeue_on
        else None
    )
    engine = Engine(
        settings, Snapshot.empty(m.name for m in settings.fetched_metrics), clock(), turned_away
    )
    telemetry.watch(lambda: engine.snapshot, clock)
    if settings.explain.node_metrics:
        telemetry.watch_nodes(lambda: node_figures(engine, clock()))
    requeuer = Requeuer(settings, kube, telemetry, clock) if requeue_on and kube else None
    return _Parts(settings, kube, clock, telemetry, engine, NodeCache(), requeuer, {})


def _refresher(parts: _Parts, provider: MetricsProvider | None) -> Refresher:
    """The background refresher; each snapshot it installs may let turned-away pods in."""
    engine, requeuer, clock = parts.engine, parts.requeuer, parts.clock

    def installed(snapshot: Snapshot) -> None:
        if requeuer is not None:
            requeuer.recovered(engine.recovered(clock()), snapshot.taken_at)

    return Refresher(
        parts.settings,
        engine,
        provider if provider is not None else provider_for(parts.settings),
        parts.nodes.inventory if parts.kube is not None else None,
        parts.telemetry,
        clock,
        installed,
    )


def _placement_events(parts: _Parts) -> Callable[[str], None]:
    """The Event poster for the pods we place, when enabled: its `placed` callback."""
    if not parts.settings.explain.events or parts.kube is None:
        return ignore_pod
    poster = EventPoster(
        parts.settings, parts.engine.pods, parts.kube, parts.telemetry, parts.clock
    )
    parts.background["events"] = poster.run
    return poster.placed


def _watches(
    parts: _Parts,
    binder: Binder,
    on_placed: Callable[[str], None],
    observer: ShadowObserver | None,
) -> tuple[Informer, ...]:
    """The node watch, and the pod watch feeding the herd guard, requeue and the shadow."""
    settings, kube, engine, requeuer = parts.settings, parts.kube, parts.engine, parts.requeuer
    informers: list[Informer] = []

    def nodes_changed(now: float) -> None:
        # A node new or resized, or one gone: a pod turned away may fit now.
        if requeuer is not None:
            requeuer.recovered(engine.recovered(now), now)

    if kube is not None:
        nodes = NodeEventHandler(parts.nodes, engine, changed=nodes_changed, clock=parts.clock)
        informers.append(node_informer(settings, kube, nodes, parts.telemetry))
        if settings.kubernetes.watch_pods or observer is not None:
            handler = PodEventHandler(
                engine,
                forget=requeuer.forget if requeuer is not None else ignore_pod,
                placed=on_placed,
                binding=binder.binding,
                seen=observer,
                clock=parts.clock,
            )
            informers.append(pod_informer(settings, kube, handler, parts.telemetry, parts.clock))
    for informer in informers:
        parts.background[f"watch-{informer.status.resource}"] = informer.run
    if requeuer is not None:
        parts.background["requeue"] = requeuer.run

    def placement() -> PlacementFigures:
        by_source: dict[str, int] = {}
        for r in engine.reservations.values():
            by_source[r.source] = by_source.get(r.source, 0) + 1
        turned_away = engine.turned_away
        waiting = len(turned_away) if turned_away is not None else 0
        pending = requeuer.pending if requeuer is not None else 0
        return (
            by_source,
            waiting,
            pending,
            {i.status.resource: i.status.watching for i in informers},
        )

    parts.telemetry.watch_placement(placement, lambda: engine.guard.estimates)
    return tuple(informers)


def _reloader(
    parts: _Parts, policy_file: PolicyFile | None, as_read: Settings, refresher: Refresher
) -> PolicyReloader | None:
    """Live reload of the policy file, when the service was built from one."""
    if policy_file is None:
        return None
    engine = parts.engine

    async def apply(new: Settings) -> None:
        # The first refresh with the new metrics installs the new policies with it.
        await refresher.refresh_once(effective(engine.settings, new))

    reloader = PolicyReloader(
        policy_file.path, policy_file.environ, as_read, policy_file.sha256, apply, parts.clock
    )
    parts.telemetry.watch_config(reloader.figures)
    parts.background["policy-watch"] = reloader.triggers.watch
    return reloader


def _rebalancer(
    parts: _Parts, leader: Elector | None, details: dict[str, Callable[[], object]]
) -> Rebalancer | None:
    """In rebalance mode: the leader election and the rebalancer, and their /readyz part."""
    kube = parts.kube
    if leader is None or kube is None:
        return None
    engine, nodes = parts.engine, parts.nodes
    counters = RebalanceTelemetry(parts.telemetry.registry, lambda: leader.is_leader)
    rebalancer = Rebalancer(
        engine, kube, leader, counters, lambda: nodes.inventory().cpu_cores, parts.clock
    )
    parts.background["leader"] = leader.run
    parts.background["rebalance"] = rebalancer.run
    details["rebalancer"] = lambda: rebalancer_detail(engine.settings, leader, rebalancer)
    return rebalancer


def _tainter(
    parts: _Parts, leader: Elector | None, details: dict[str, Callable[[], object]]
) -> Tainter | None:
    """With overload.enabled: the taint writer, while `leader` holds its Lease."""
    kube = parts.kube
    if not parts.settings.overload.enabled or kube is None or leader is None:
        if parts.settings.overload.enabled:
            log.warning("overload.enabled but no Kubernetes client or Lease: no taints")
        return None
    nodes = parts.nodes
    counter = OverloadTelemetry(parts.telemetry.registry, lambda: len(tainted_nodes(nodes)))
    tainter = Tainter(parts.engine, nodes, kube, leader, counter, parts.clock)
    parts.background["overload-leader"] = leader.run
    parts.background["overload"] = tainter.run
    details["overload"] = tainter.detail
    return tainter


def _policy_detail(settings: Settings, reloader: PolicyReloader | None) -> dict[str, object]:
    """/readyz: the policies in force and, from a file, its hash and the last reload."""
    detail: dict[str, object] = {
        "policies": list(settings.policy_map),
        "defaultPolicy": settings.default.name,
    }
    if reloader is not None:
        detail.update(reloader.detail())
    return detail


async def _shutdown(kube: KubeAPI | None, reloader: PolicyReloader | None) -> None:
    if reloader is not None:
        reloader.triggers.remove_sighup()
    if kube is not None:
        await kube.close()
