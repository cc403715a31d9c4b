"""Domain types shared by the pure layers and the edges. No I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.decisions.usage import EMPTY, UsageTable

NodeName = str
MetricName = str


@dataclass(frozen=True, slots=True)
class MetricSeries:
    """The latest good values of one metric, node -> value, and when they were fetched;
    `error`: the last refresh's, kept beside the old values (stale data over no data)."""

    values: Mapping[NodeName, float] = field(default_factory=dict)
    fetched_at: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One immutable view of every metric; the refresher swaps in a new one atomically."""

    metrics: Mapping[MetricName, MetricSeries]
    taken_at: float
    generation: int = 0
    usage: UsageTable = EMPTY
    """What pods really use (per workload, per young pod): the herd guard's estimates."""

    @classmethod
    def empty(cls, metrics: Iterable[MetricName]) -> Snapshot:
        return cls(metrics={m: MetricSeries() for m in metrics}, taken_at=0.0)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: NodeName
    internal_ips: tuple[str, ...] = ()
    cpu_cores: float | None = None
    labels: tuple[tuple[str, str], ...] = ()
    """metadata.labels, sorted."""
    taints: tuple[Taint, ...] = ()

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


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
class PodEvent:
    """An events.k8s.io/v1 Event about one pod, or one node with `kind` "Node" (then in
    `namespace` "default", where Events about cluster-scoped objects go)."""

    namespace: str
    name: str
    uid: str
    reason: str
    action: str
    note: str
    time: float
    instance: str
    type: str = "Normal"
    kind: str = "Pod"


@dataclass(frozen=True, slots=True)
class FilterDecision:
    """The nodes of one filter request that fail, with the reason; the rest pass."""

    failed: Mapping[NodeName, str]
    """Rejected whatever the scheduler does (FailedAndUnresolvableNodes)."""
    passed: Sequence[NodeName] | None = None
    """Our shortlist (decisions.shortlist); None: every node that did not fail."""


@dataclass(frozen=True, slots=True)
class Priorities:
    """The hosts of one prioritize answer with their scores, in one of two forms."""

    hosts: Sequence[NodeName]
    fragments: Mapping[NodeName, bytes] | None = None
    """Serialised `{"Host","Score"}` per host, precomputed per snapshot (table.py)."""
    scores: Sequence[int] = ()
    """Scores computed for this request, aligned with `hosts`, when `fragments` is None."""
    whole: bytes | None = None
    """The whole answer, already serialised (table.WholeAnswer); hosts scoring 0 may be
    left out."""
