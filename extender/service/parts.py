"""The parts every mode of the service is built from (extender.service.compose puts them
together, one builder per mode).

`shared_parts` makes what every mode has: the engine (and what it remembers of turned-away
pods), the node cache, the requeuer and the service's own metrics. Each function after it
builds one more part from those and returns it with the background tasks it needs, so a
builder reads as the list of its parts and the tasks are gathered in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extender.cluster.event_poster import EventPoster
from extender.cluster.informer import Informer, WatchStatus
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
from extender.service.app import Task
from extender.service.telemetry import OverloadTelemetry, PlacementFigures, Telemetry
from extender.service.watches import ignore_pod, node_informer, pod_informer

log = logging.getLogger("decice.service")

Tasks = dict[str, Task]
"""Background tasks by name, run while the app serves (service.app.Lifecycle)."""
Details = dict[str, Callable[[], object]]
"""More /readyz sections by name, each read when asked."""


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """Where the policy came from, for live reload (reload.read_policy gives the hash)."""

    path: Path
    environ: Mapping[str, str]
    """The overrides read at start (PROMETHEUS_URL, KUBECONFIG), applied on reload too."""
    sha256: str
    """sha256 of the bytes the running Settings were read from."""


@dataclass(frozen=True, slots=True)
class SharedParts:
    """What every mode has, and what the other parts are built from."""

    settings: Settings
    kube: KubeAPI | None
    clock: Callable[[], float]
    telemetry: Telemetry
    engine: Engine
    nodes: NodeCache
    requeuer: Requeuer | None


def shared_parts(
    settings: Settings, kube: KubeAPI | None, clock: Callable[[], float]
) -> SharedParts:
    """The engine (and what it remembers of turned-away pods), the node cache, the
    requeuer and the service's own metrics."""
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
    return SharedParts(settings, kube, clock, telemetry, engine, NodeCache(), requeuer)


def refresher(
    parts: SharedParts,
    provider: MetricsProvider | None,
    also: Callable[[Snapshot], None] | None = None,
) -> Refresher:
    """The background refresher (the app's lifespan runs it); each snapshot it installs
    may let turned-away pods in, is told to `also` (the shadow's exceedance watch), and is
    frozen out of the collector's walks (metrics.heap)."""
    engine, requeuer, clock = parts.engine, parts.requeuer, parts.clock

    def installed(snapshot: Snapshot) -> None:
        if requeuer is not None:
            requeuer.recovered(engine.recovered(clock()), snapshot.taken_at)
        if also is not None:
            also(snapshot)

    return Refresher(
        parts.settings,
        engine,
        provider if provider is not None else provider_for(parts.settings),
        parts.nodes.inventory if parts.kube is not None else None,
        parts.telemetry,
        clock,
        installed,
        HEAP,
    )


def placement_events(parts: SharedParts) -> tuple[Callable[[str], None], Tasks]:
    """The Event poster for the pods we place, when enabled: its `placed` callback."""
    kube = parts.kube
    if not parts.settings.explain.events or kube is None:
        return ignore_pod, {}
    poster = EventPoster(parts.settings, parts.engine.pods, kube, parts.telemetry, parts.clock)
    return poster.placed, {"events": poster.run}


def watches(
    parts: SharedParts,
    binding: Callable[[str], bool],
    placed: Callable[[str], None],
    seen: Callable[[Assigned, Any, float], None] | None = None,
) -> tuple[tuple[Informer, ...], Tasks]:
    """The node watch, and the pod watch feeding the herd guard, requeue and (`seen`) the
    shadow; with them, the requeue loop."""
    settings, kube, engine, requeuer = parts.settings, parts.kube, parts.engine, parts.requeuer
    informers: list[Informer] = []

    def nodes_changed(now: float) -> None:
        # A node new or resized, or one gone: a pod turned away may fit now.
        if requeuer is not None:
            requeuer.recovered(engine.recovered(now), now)

    if kube is not None:
        engine.watch_sizes(parts.clock())  # node sizes come from the node watch now
        nodes = NodeEventHandler(parts.nodes, engine, changed=nodes_changed, clock=parts.clock)
        informers.append(node_informer(settings, kube, nodes, parts.telemetry))
        if settings.kubernetes.watch_pods or seen is not None:
            handler = PodEventHandler(
                engine,
                forget=requeuer.forget if requeuer is not None else ignore_pod,
                placed=placed,
                binding=binding,
                seen=seen,
                clock=parts.clock,
            )
            informers.append(pod_informer(settings, kube, handler, parts.telemetry, parts.clock))
    tasks: Tasks = {f"watch-{i.status.resource}": i.run for i in informers}
    if requeuer is not None:
        tasks["requeue"] = requeuer.run

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
    return tuple(informers), tasks


def watch_status(informers: tuple[Informer, ...]) -> dict[str, WatchStatus]:
    return {i.status.resource: i.status for i in informers}


def reloader(
    parts: SharedParts, policy_file: PolicyFile | None, as_read: Settings, refresh: Refresher
) -> tuple[PolicyReloader | None, Tasks]:
    """Live reload of the policy file, when the service was built from one. `as_read`:
    what the file said at start (a reload compares the new file with it)."""
    if policy_file is None:
        return None, {}
    engine = parts.engine

    async def apply(new: Settings) -> None:
        # The first refresh with the new metrics installs the new policies with it.
        await refresh.refresh_once(effective(engine.settings, new))

    policy = PolicyReloader(
        policy_file.path, policy_file.environ, as_read, policy_file.sha256, apply, parts.clock
    )
    parts.telemetry.watch_config(policy.figures)
    return policy, {"policy-watch": policy.triggers.watch}


def details(parts: SharedParts, policy: PolicyReloader | None) -> Details:
    """The /readyz sections every mode has: the policies in force, the herd guard."""
    engine, clock = parts.engine, parts.clock
    return {
        "policy": lambda: policy_detail(engine.settings, policy),
        "herdGuard": lambda: engine.guard.detail(engine.snapshot, clock()),
    }


def policy_detail(settings: Settings, policy: PolicyReloader | None) -> dict[str, object]:
    """/readyz: the policies in force and, from a file, its hash and the last reload."""
    detail: dict[str, object] = {
        "policies": list(settings.policy_map),
        "defaultPolicy": settings.default.name,
    }
    if policy is not None:
        detail.update(policy.detail())
    return detail


def tainter(parts: SharedParts, leader: Leadership | None) -> tuple[Tainter | None, Tasks, Details]:
    """With overload.enabled: the taint writer, while `leader` holds its Lease, and its
    /readyz section."""
    kube = parts.kube
    if not parts.settings.overload.enabled or kube is None or leader is None:
        if parts.settings.overload.enabled:
            log.warning("overload.enabled but no Kubernetes client or Lease: no taints")
        return None, {}, {}
    nodes = parts.nodes
    counter = OverloadTelemetry(parts.telemetry.registry, lambda: len(tainted_nodes(nodes)))
    writer = Tainter(parts.engine, nodes, kube, leader, counter, parts.clock)
    tasks: Tasks = {"overload-leader": leader.run, "overload": writer.run}
    return writer, tasks, {"overload": writer.detail}


def shutdown(
    kube: KubeAPI | None, policy: PolicyReloader | None
) -> Callable[[], Coroutine[object, object, None]]:
    """What the app does last: stop listening for SIGHUP, close the API client."""

    async def stop() -> None:
        if policy is not None:
            policy.triggers.remove_sighup()
        if kube is not None:
            await kube.close()

    return stop
