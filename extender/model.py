"""Domain types shared by the pure layers (scoring, wire) and the edges.

Nothing here does I/O or imports starlette, kubernetes or prometheus_api_client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

NodeName = str
MetricName = str


@dataclass(frozen=True, slots=True)
class MetricSeries:
    """The latest good values of one metric, node -> value, and when they were fetched.

    `fetched_at` is None until the first successful fetch; `error` is the last
    refresh error, kept beside the old values (we serve stale data over no data).
    """

    values: Mapping[NodeName, float] = field(default_factory=dict)
    fetched_at: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One immutable view of every metric; the refresher swaps in a new one atomically."""

    metrics: Mapping[MetricName, MetricSeries]
    taken_at: float
    generation: int = 0


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the Kubernetes API tells about a node that scoring needs."""

    name: NodeName
    internal_ips: tuple[str, ...] = ()
    cpu_cores: float | None = None


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """Nodes known from the API: address -> name (for `instance` labels) and CPU size."""

    by_ip: Mapping[str, NodeName] = field(default_factory=dict)
    cpu_cores: Mapping[NodeName, float] = field(default_factory=dict)

    @classmethod
    def from_nodes(cls, nodes: list[NodeInfo]) -> NodeInventory:
        by_ip = {ip: n.name for n in nodes for ip in n.internal_ips}
        cores = {n.name: n.cpu_cores for n in nodes if n.cpu_cores is not None}
        return cls(by_ip=by_ip, cpu_cores=cores)


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The little we need to know about a pod to filter, guard and bind it."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str
    cpu_request_cores: float | None = None
    node_name: str | None = None
