"""One way to wire the service: settings in, a ready-to-serve stack out.

`serve` calls `build_service(settings, kube=connect_kube(settings))`; tests call it with a
fake provider or a client for the loopback API server. Nothing else builds the parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from starlette.applications import Starlette

from extender.app import create_app
from extender.binding import Binder, KubeBinder
from extender.config import Settings
from extender.engine import Engine
from extender.events import EventPoster, EventSink
from extender.metrics import MetricsProvider, provider_for
from extender.model import NodeInfo, Snapshot
from extender.refresher import Refresher
from extender.telemetry import Telemetry

if TYPE_CHECKING:
    from extender.kube import KubeClient

log = logging.getLogger("decice.service")


class KubeAPI(KubeBinder, EventSink, Protocol):
    """What the service asks of the Kubernetes API (extender.kube.KubeClient, blocking)."""

    def list_nodes(self) -> list[NodeInfo]: ...


@dataclass(frozen=True, slots=True)
class Service:
    settings: Settings
    app: Starlette
    engine: Engine
    binder: Binder
    refresher: Refresher
    telemetry: Telemetry


def build_service(
    settings: Settings,
    *,
    provider: MetricsProvider | None = None,
    kube: KubeAPI | None = None,
    clock: Callable[[], float] = time.time,
) -> Service:
    """The engine, refresher, binder and app for `settings`.

    `provider` defaults to the policy's own (Prometheus or static); `kube` None means no
    Kubernetes client: filter and prioritize work, binds answer an Error, and `instance`
    labels cannot be mapped to nodes. The first refresh runs when the app starts.
    """
    telemetry = Telemetry()
    engine = Engine(settings, Snapshot.empty(m.name for m in settings.metrics), clock())
    telemetry.watch(lambda: engine.snapshot, clock)
    if settings.explain.node_metrics:
        telemetry.watch_nodes(lambda: engine.node_figures(clock()))
    refresher = Refresher(
        settings,
        engine,
        provider if provider is not None else provider_for(settings),
        kube.list_nodes if kube is not None else None,
        telemetry,
        clock,
    )
    background: dict[str, Callable[[], Coroutine[object, object, None]]] = {}
    on_placed = None
    if settings.explain.events and kube is not None:
        poster = EventPoster(settings, engine.pods, kube, telemetry, clock)
        background["events"] = poster.run
        on_placed = poster.placed
    binder = Binder(
        settings, engine, kube, clock=clock, on_outcome=telemetry.bound, on_placed=on_placed
    )
    app = create_app(settings, engine, binder, telemetry, refresher, clock, background)
    return Service(settings, app, engine, binder, refresher, telemetry)


def connect_kube(settings: Settings) -> KubeClient | None:
    """The Kubernetes client when the policy needs one (bind, `instance` labels), else None;
    also None, with a warning, when no kubeconfig or service account can be loaded."""
    if not settings.bind.enabled and settings.prometheus.node_label != "instance":
        return None
    from extender.kube import KubeClient, load_api_client  # the client is slow to import

    try:
        api = load_api_client(settings.kubernetes.kubeconfig)
    except Exception as exc:
        log.warning("no Kubernetes client (%s); binds will answer an Error", exc)
        return None
    return KubeClient(api, timeout=settings.bind.timeout, retries=settings.bind.retries)
