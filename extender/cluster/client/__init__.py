"""The Kubernetes API client: the one place the service talks to the API server.

`KubeClient` is the transport (extender.cluster.client.api: connections, timeouts, retries,
auth headers) with one module per family of calls, as kopf's clients keep them apart:
binding, evicting, events, fetching, patching, reviewing, watching. Errors leave it as
`KubeError` (extender.cluster.client.errors); `load_api_client` (extender.cluster.client.auth)
reads kubeconfig or the in-cluster service account.
"""

from __future__ import annotations

from extender.cluster.client.auth import load_api_client
from extender.cluster.client.binding import BindCalls
from extender.cluster.client.errors import (
    KubeAlreadyBound,
    KubeError,
    KubeEvictionRefused,
    KubeUnavailable,
)
from extender.cluster.client.events import EventPosting
from extender.cluster.client.evicting import Evicting
from extender.cluster.client.fetching import Fetching
from extender.cluster.client.patching import Patching
from extender.cluster.client.reviewing import Reviewing
from extender.cluster.client.watching import Watching

__all__ = [
    "KubeAlreadyBound",
    "KubeClient",
    "KubeError",
    "KubeEvictionRefused",
    "KubeUnavailable",
    "load_api_client",
]


class KubeClient(BindCalls, Evicting, EventPosting, Fetching, Patching, Reviewing, Watching):
    """Async Kubernetes calls with timeouts, bounded retries and mapped errors (see
    extender.cluster.client.api.KubeTransport for the transport's contract)."""
