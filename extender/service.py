"""One way to wire the service: settings in, a ready-to-serve stack out.

`serve` calls `build_service(settings, kube=connect_kube(settings))`; tests call it with a
fake provider or a client for the loopback API server. Nothing else builds the parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.applications import Starlette

from extender.app import create_apps
from extender.binding import Binder, KubeBinder
from extender.causes import describe
from extender.config import RETRY_BACKOFF, Settings
from extender.engine import Engine
from extender.events import EventPoster, EventSink
from extender.informer import Informer, WatchCounter, Watcher
from extender.metrics import MetricsProvider, provider_for
from extender.model import NodeInfo, Snapshot
from extender.nodes import NodeCache
from extender.podwatch import PodEventHandler
from extender.rebalancer import Leadership, RebalanceAPI, Rebalancer
from extender.refresher import Refresher
from extender.reload import PolicyReloader, effective
from extender.requeue import PodAnnotator, Requeuer
from extender.telemetry import PlacementFigures, RebalanceTelemetry, Telemetry
from extender.turnedaway import TurnedAwayPods

if TYPE_CHECKING:
    from extender.kube import KubeClient

log = logging.getLogger("decice.service")


class KubeAPI(KubeBinder, EventSink, Watcher, PodAnnotator, RebalanceAPI, Protocol):
    """What the service asks of the Kubernetes API (extender.kube.KubeClient, async)."""

    async def list_nodes(self) -> tuple[list[NodeInfo], str]: ...

    async def list_page(
        self, path: str, *, limit: int, continue_token: str | None = None
    ) -> dict[str, Any]: ...

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

    async def prepare(self) -> None:
        """What the app does before its first refresh (the CLI calls it too)."""
        await _prepare(self.informers)


PREPARE_TIMEOUT = 10.0


def build_service(
    settings: Settings,
    *,
    provider: MetricsProvider | None = None,
    kube: KubeAPI | None = None,
    kube_problem: str | None = None,
    clock: Callable[[], float] = time.time,
    policy_file: PolicyFile | None = None,
    leader: Elector | None = None,
) -> Service:
    """The engine, refresher, binder, watches and app for `settings`.

    `provider` defaults to the policy's own (Prometheus or static); `kube` None means no
    Kubernetes client: filter and prioritize work, binds answer an Error, `instance`
    labels cannot be mapped to nodes, and the herd guard hears only of our own binds.
    `kube_problem` says why a client the policy needs is missing (`open_kube`): with
    bind enabled, that is logged at ERROR and /readyz answers 503 naming it.
    The first refresh runs when the app starts. With `policy_file`, a change of that
    file or SIGHUP reloads its policies (extender.reload).

    `leader` (an elector on the rebalancer's Lease) builds the rebalance mode instead: the
    same refresher, engine and watches, no verbs, and the rebalancer acting while `leader`
    holds the Lease. Events on placed pods and requeue patches stay the extender's.
    """
    as_read = settings  # what the file says: a reload compares the new file with it
    if leader is not None:
        if kube is None:
            raise ValueError(f"the rebalancer needs a Kubernetes client: {kube_problem}")
        settings = _for_rebalancing(settings)
    problems = _kube_problems(settings, kube_problem) if kube is None else ()
    telemetry = Telemetry()
    watch_pods = kube is not None and settings.kubernetes.watch_pods
    requeue_on = watch_pods and settings.requeue.enabled
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
        telemetry.watch_nodes(lambda: engine.node_figures(clock()))
    nodes = NodeCache()
    requeuer = Requeuer(settings, kube, telemetry, clock) if requeue_on and kube else None

    def installed(snapshot: Snapshot) -> None:
        if requeuer is not None:
            requeuer.recovered(engine.recovered(clock()), snapshot.taken_at)

    refresher = Refresher(
        settings,
        engine,
        provider if provider is not None else provider_for(settings),
        nodes.inventory if kube is not None else None,
        telemetry,
        clock,
        installed,
    )
    background: dict[str, Callable[[], Coroutine[object, object, None]]] = {}
    on_placed: Callable[[str], None] = _nothing
    if settings.explain.events and kube is not None:
        poster = EventPoster(settings, engine.pods, kube, telemetry, clock)
        background["events"] = poster.run
        on_placed = poster.placed
    binder = Binder(
        settings, engine, kube, clock=clock, on_outcome=telemetry.bound, on_placed=on_placed
    )
    informers: list[Informer] = []
    if kube is not None:
        informers.append(_node_informer(settings, kube, nodes, telemetry))
    if watch_pods and kube is not None:
        handler = PodEventHandler(
            engine,
            forget=requeuer.forget if requeuer is not None else _nothing,
            placed=on_placed,
            binding=binder.binding,
            clock=clock,
        )
        informers.append(_pod_informer(settings, kube, handler, telemetry))
    for informer in informers:
        background[f"watch-{informer.status.resource}"] = informer.run
    if requeuer is not None:
        background["requeue"] = requeuer.run

    def placement() -> PlacementFigures:
        by_source: dict[str, int] = {}
        for r in engine.reservations.values():
            by_source[r.source] = by_source.get(r.source, 0) + 1
        waiting = len(turned_away) if turned_away is not None else 0
        pending = requeuer.pending if requeuer is not None else 0
        return (
            by_source,
            waiting,
            pending,
            {i.status.resource: i.status.watching for i in informers},
        )

    telemetry.watch_placement(placement)
    service_informers = tuple(informers)
    reloader = None
    if policy_file is not None:

        async def apply(new: Settings) -> None:
            # The first refresh with the new metrics installs the new policies with it.
            await refresher.refresh_once(effective(engine.settings, new))

        reloader = PolicyReloader(
            policy_file.path,
            policy_file.environ,
            as_read,
            policy_file.sha256,
            apply,
            telemetry,
            clock,
        )
        background["policy-watch"] = reloader.watch
    details: dict[str, Callable[[], object]] = {
        "policy": lambda: _policy_detail(engine.settings, reloader)
    }
    rebalancer = None
    if leader is not None and kube is not None:
        counters = RebalanceTelemetry(telemetry.registry, lambda: leader.is_leader)
        rebalancer = Rebalancer(
            engine, kube, leader, counters, lambda: nodes.inventory().cpu_cores, clock
        )
        background["leader"] = leader.run
        background["rebalance"] = rebalancer.run
        details["rebalancer"] = lambda: _rebalancer_detail(engine.settings, leader, rebalancer)
    apps = create_apps(
        settings,
        engine,
        binder,
        telemetry,
        refresher,
        clock,
        background,
        watches={i.status.resource: i.status for i in service_informers},
        prepare=lambda: _prepare(service_informers, reloader),
        shutdown=lambda: _shutdown(kube, reloader),
        problems=problems,
        details=details,
        verbs=leader is None,
    )
    return Service(
        settings,
        apps.verbs,
        apps.metrics,
        engine,
        binder,
        refresher,
        telemetry,
        nodes,
        service_informers,
        requeuer,
        problems=problems,
        reloader=reloader,
        rebalancer=rebalancer,
    )


def _kube_problems(settings: Settings, kube_problem: str | None) -> tuple[str, ...]:
    """The readiness problems of running without the Kubernetes client, logged once."""
    if kube_problem is None:
        return ()
    if settings.bind.enabled:
        problem = f"bind: enabled but no Kubernetes client: {kube_problem}"
        log.error(
            "%s; every bind answers an Error and /readyz answers 503 "
            "(filter and prioritize still answer)",
            problem,
        )
        return (problem,)
    log.warning(
        "no Kubernetes client: %s; `instance` labels cannot be mapped to nodes and the "
        "herd guard hears only of our own binds",
        kube_problem,
    )
    return ()


def _nothing(uid: str) -> None:
    pass


async def _prepare(informers: tuple[Informer, ...], reloader: PolicyReloader | None = None) -> None:
    """Each watch's first list, bounded in time (nodes map `instance` labels in the first
    refresh); a failure is logged and the watch loop retries it. SIGHUP reloads the policy
    from now on (uvicorn handles SIGINT and SIGTERM only)."""
    if reloader is not None:
        reloader.install_sighup()
    for informer in informers:
        await informer.prime(PREPARE_TIMEOUT)


async def _shutdown(kube: KubeAPI | None, reloader: PolicyReloader | None) -> None:
    if reloader is not None:
        reloader.remove_sighup()
    if kube is not None:
        await kube.close()


class Elector(Leadership, Protocol):
    """The rebalancer's leader election (extender.leader.LeaderElector)."""

    async def run(self) -> None: ...

    def detail(self) -> dict[str, object]: ...


def _for_rebalancing(settings: Settings) -> Settings:
    """The rebalancer's view of the policy: the extender posts the Events of placements
    and requeues turned-away pods; a second writer would only duplicate them."""
    return settings.model_copy(
        update={
            "explain": settings.explain.model_copy(update={"events": False}),
            "requeue": settings.requeue.model_copy(update={"enabled": False}),
        }
    )


def _rebalancer_detail(
    settings: Settings, leader: Elector, rebalancer: Rebalancer
) -> dict[str, object]:
    last = rebalancer.last
    detail: dict[str, object] = {"mode": settings.rebalance.mode, "leader": leader.detail()}
    if last is not None:
        counts: dict[str, int] = {}
        for d in last.decisions:
            counts[d.outcome] = counts.get(d.outcome, 0) + 1
        detail["lastCheck"] = {"decisions": counts, "protected": dict(last.skipped)}
    return detail


def _policy_detail(settings: Settings, reloader: PolicyReloader | None) -> dict[str, object]:
    """/readyz: the policies in force and, from a file, its hash and the last reload."""
    detail: dict[str, object] = {
        "policies": list(settings.policy_map),
        "defaultPolicy": settings.default.name,
    }
    if reloader is not None:
        detail.update(reloader.detail())
    return detail


def _node_informer(
    settings: Settings, kube: KubeAPI, nodes: NodeCache, counter: WatchCounter
) -> Informer:
    async def start() -> str:
        found, version = await kube.list_nodes()
        nodes.replace(found)
        return version

    return Informer(
        "nodes",
        "/api/v1/nodes",
        kube,
        start,
        nodes.apply,
        timeout_seconds=settings.kubernetes.watch_timeout,
        counter=counter,
    )


def _pod_informer(
    settings: Settings, kube: KubeAPI, handler: PodEventHandler, counter: WatchCounter
) -> Informer:
    async def start() -> str:
        # One pod is enough: the list's resourceVersion starts the watch from now.
        page = await kube.list_page("/api/v1/pods", limit=1)
        version = (page.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise ValueError("pod list has no metadata.resourceVersion")
        return version

    return Informer(
        "pods",
        "/api/v1/pods",
        kube,
        start,
        handler,
        timeout_seconds=settings.kubernetes.watch_timeout,
        counter=counter,
    )


@dataclass(frozen=True, slots=True)
class KubeConnection:
    client: KubeClient | None
    problem: str | None = None
    """Why the client the policy needs could not be built (None: built, or not needed)."""


def open_kube(settings: Settings, required: bool = False) -> KubeConnection:
    """The Kubernetes client when the policy needs one (bind, `instance` labels, the pod
    watch of the herd guard or requeue); else none. When no kubeconfig or service account
    can be loaded: no client, and the cause, for `build_service(kube_problem=...)`.
    `required`: a client whatever the policy (the rebalancer)."""
    watch = settings.kubernetes.watch_pods and (settings.herd_guarded or settings.requeue.enabled)
    needed = settings.bind.enabled or watch or settings.prometheus.node_label == "instance"
    if not (needed or required):
        return KubeConnection(None)
    from extender.kube import KubeClient, load_api_client  # the client is slow to import

    try:
        api = load_api_client(settings.kubernetes.kubeconfig)
        # TLS files and the proxy are read here: a bad one is a config problem too.
        client = KubeClient(
            api.configuration,
            timeout=settings.bind.timeout,
            retries=settings.bind.retries,
            backoff=RETRY_BACKOFF,
        )
    except Exception as exc:
        return KubeConnection(None, describe(exc))
    return KubeConnection(client)


def connect_kube(settings: Settings) -> KubeClient | None:
    """`open_kube`'s client, the cause of a failure logged as a warning."""
    connection = open_kube(settings)
    if connection.problem is not None:
        log.warning(
            "no Kubernetes client (%s); binds will answer an Error and the herd guard "
            "hears only of our own binds",
            connection.problem,
        )
    return connection.client
