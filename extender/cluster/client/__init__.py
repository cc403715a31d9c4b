"""The Kubernetes API client: the one place the service talks to the API server.

One transport (extender.cluster.client.api: an aiohttp session, timeouts, retries, auth
headers) and, as kopf's clients keep them, one module per family of calls, each call a
function over the transport's `request()` (or `stream()`, for watches): binding,
evicting, events, fetching, patching, reviewing, watching. `KubeClient` is the transport
with those functions as its methods, so `client.bind(...)` is `binding.bind(client, ...)`;
the rest of the service sees it as extender.cluster.kubeapi.KubeAPI. Errors leave it as
`KubeError` (extender.cluster.client.errors); `load_api_client` (extender.cluster.client.auth)
reads kubeconfig or the in-cluster service account.
"""

from __future__ import annotations

from extender.cluster.client import (
    binding,
    events,
    evicting,
    fetching,
    patching,
    reviewing,
    watching,
)
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
    Transport for the contract); each method is its family's module function."""

    bind = binding.bind
    get_pod = fetching.get_pod
    get_node = fetching.get_node
    list_nodes = fetching.list_nodes
    list_page = fetching.list_page
    list_pods = fetching.list_pods
    list_pdbs = fetching.list_pdbs
    annotate_pod = patching.annotate_pod
    set_node_taints = patching.set_node_taints
    create_event = events.create_event
    evict = evicting.evict
    access_review = reviewing.access_review
    watch = watching.watch
