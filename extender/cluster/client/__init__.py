"""The Kubernetes API client: one transport (api.py), and, as kopf's clients keep them,
modules of functions over its `request()` (fetching, writes, watching), `KubeClient`'s
methods.
"""

from __future__ import annotations

from extender.cluster.client import fetching, watching, writes
from extender.cluster.client.api import Transport
from extender.cluster.client.auth import load_api_client
from extender.cluster.client.errors import (
    KubeAlreadyBound,
    KubeError,
    KubeEvictionRefused,
    KubeUnavailable,
)

__all__ = [
    "KubeAlreadyBound",
    "KubeClient",
    "KubeError",
    "KubeEvictionRefused",
    "KubeUnavailable",
    "load_api_client",
]


class KubeClient(Transport):
    """Async Kubernetes calls with timeouts, bounded retries and mapped errors (see
    Transport); each method is a module function."""

    bind = writes.bind
    get_pod = fetching.get_pod
    get_node = fetching.get_node
    list_nodes = fetching.list_nodes
    list_page = fetching.list_page
    list_pods = fetching.list_pods
    list_pdbs = fetching.list_pdbs
    annotate_pod = writes.annotate_pod
    set_node_taints = writes.set_node_taints
    create_event = writes.create_event
    evict = writes.evict
    access_review = writes.access_review
    watch = watching.watch
