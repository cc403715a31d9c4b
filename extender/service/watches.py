"""The service's watches of the cluster: nodes (addresses and sizes, for `instance` labels
and the herd guard) and pods (assignments whoever bound them, for the herd guard and
requeue), and their first lists before serving."""

from __future__ import annotations

from typing import Any, Protocol

from extender.cluster.informer import Informer, WatchCounter, Watcher
from extender.cluster.podwatch import PodEventHandler
from extender.decisions.model import NodeInfo
from extender.decisions.nodes import NodeCache
from extender.policy.reload import PolicyReloader
from extender.policy.settings import Settings

PREPARE_TIMEOUT = 10.0
"""Seconds each watch's first list may take before the service serves without it."""


class Lister(Watcher, Protocol):
    """What the watches ask of the Kubernetes API (extender.cluster.client.KubeClient)."""

    async def list_nodes(self) -> tuple[list[NodeInfo], str]: ...

    async def list_page(
        self, path: str, *, limit: int, continue_token: str | None = None
    ) -> dict[str, Any]: ...


def node_informer(
    settings: Settings, kube: Lister, nodes: NodeCache, counter: WatchCounter
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


def pod_informer(
    settings: Settings, kube: Lister, handler: PodEventHandler, counter: WatchCounter
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


async def prepare(informers: tuple[Informer, ...], reloader: PolicyReloader | None = None) -> None:
    """Each watch's first list, bounded in time (nodes map `instance` labels in the first
    refresh); a failure is logged and the watch loop retries it. SIGHUP reloads the policy
    from now on (uvicorn handles SIGINT and SIGTERM only)."""
    if reloader is not None:
        reloader.triggers.install_sighup()
    for informer in informers:
        await informer.prime(PREPARE_TIMEOUT)


def nothing(uid: str) -> None:
    """A callback for what is not wired (no Events, no requeue)."""
