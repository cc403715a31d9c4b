"""Connecting to the Kubernetes API when the policy needs it, or saying why not."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from extender.errors.causes import describe
from extender.policy.sections import RETRY_BACKOFF
from extender.policy.settings import Settings

if TYPE_CHECKING:
    from extender.cluster.client import KubeClient

log = logging.getLogger("decice.service")


@dataclass(frozen=True, slots=True)
class KubeConnection:
    client: KubeClient | None
    problem: str | None = None
    """Why the client the policy needs could not be built (None: built, or not needed)."""


def open_kube(settings: Settings, required: bool = False) -> KubeConnection:
    """The Kubernetes client when the policy needs one (bind, `instance` labels, the pod
    watch of the herd guard or requeue) or `required`; else, or when none can be loaded,
    no client (and the cause)."""
    watch = settings.kubernetes.watch_pods and (settings.herd_guarded or settings.requeue.enabled)
    needed = settings.bind.enabled or watch or settings.prometheus.node_label == "instance"
    if not (needed or required):
        return KubeConnection(None)
    from extender.cluster.client import KubeClient, load_api_client  # slow: kubernetes

    try:
        api = load_api_client(settings.kubernetes.kubeconfig)
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


def missing_client_problems(settings: Settings, kube_problem: str | None) -> tuple[str, ...]:
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
