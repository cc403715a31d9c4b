"""The service's watches of nodes and pods. A list after the first (`410 Gone`) replaces
what the service knew, as client-go's reflector does."""

from __future__ import annotations

import time
from collections.abc import Callable

from extender.cluster.informer import Informer
from extender.cluster.kubeapi import KubeAPI
from extender.cluster.nodewatch import NodeEventHandler
from extender.cluster.podwatch import PodEventHandler
from extender.policy.reload import PolicyReloader
from extender.policy.settings import Settings

PREPARE_TIMEOUT = 10.0
"""Seconds each watch's first list may take before the service serves without it."""
Restarted = Callable[[str, str], object]  # (resource, reason): Telemetry.watch_restart


def node_informer(
    settings: Settings, kube: KubeAPI, nodes: NodeEventHandler, restarted: Restarted
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
        nodes,
        timeout_seconds=settings.kubernetes.watch_timeout,
        restarted=restarted,
    )


ASSIGNED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The pods that hold a node: what the pod watch's first list reads."""
LIST_PAGE = 500
MAX_LIST_PAGES = 400
"""The first list reads at most this many pages, then watches from there (a pod it missed
is read at its next update)."""


def pod_informer(
    settings: Settings,
    kube: KubeAPI,
    handler: PodEventHandler,
    restarted: Restarted,
    clock: Callable[[], float] = time.time,
) -> Informer:
    async def start() -> str:
        # Every pod holding a node goes through the handler as ADDED, so a restarted
        # service counts again the pods placed in its settle window; then the pods it held
        # that the list lacks are released.
        began = clock()
        listed: set[str] = set()
        version, token = "", None
        for _ in range(MAX_LIST_PAGES):
            page = await kube.list_page(
                "/api/v1/pods", limit=LIST_PAGE, continue_token=token, field_selector=ASSIGNED
            )
            metadata = page.get("metadata") or {}
            version = version or str(metadata.get("resourceVersion") or "")
            for pod in page.get("items") or ():
                handler("ADDED", pod)
                uid = (pod.get("metadata") or {}).get("uid") if isinstance(pod, dict) else None
                if isinstance(uid, str):
                    listed.add(uid)
            token = metadata.get("continue") or None
            if token is None:
                break
        if not version:
            raise ValueError("pod list has no metadata.resourceVersion")
        if token is None:  # a list cut short at MAX_LIST_PAGES: absence proves nothing
            handler.relisted(listed, began)
        return version

    return Informer(
        "pods",
        "/api/v1/pods",
        kube,
        start,
        handler,
        timeout_seconds=settings.kubernetes.watch_timeout,
        restarted=restarted,
        watch_filter=handler.watch_filter,
    )


async def prepare(informers: tuple[Informer, ...], reloader: PolicyReloader | None = None) -> None:
    """Each watch's first list, bounded in time (nodes map `instance` labels in the first
    refresh; a failure is retried by the watch loop); SIGHUP reloads the policy from now
    on (uvicorn handles SIGINT and SIGTERM only)."""
    if reloader is not None:
        reloader.triggers.install_sighup()
    for informer in informers:
        await informer.prime(PREPARE_TIMEOUT)


def ignore_pod(uid: str) -> None:
    """A pod callback for the hooks a mode leaves out (no Events, no requeue)."""
