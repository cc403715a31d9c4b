"""The nodes of the cluster as the API reports them, kept current from a node watch (as
kube-scheduler's informer cache), and which of them a pod may go to at all. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from extender.decisions.model import NodeInfo, NodeInventory, NodeName, Snapshot, Taint
from extender.decisions.resources import cpu_cores

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a pod that does not tolerate them off a node (the scheduler's
TaintToleration filter; PreferNoSchedule only lowers a score)."""


def node_info(doc: Any) -> NodeInfo:
    """A v1.Node (decoded JSON); KeyError/TypeError when it has no name."""
    status = doc.get("status") or {}
    addresses = status.get("addresses") or ()
    cpu = (status.get("allocatable") or {}).get("cpu")
    labels = doc["metadata"].get("labels") or {}
    taints = (doc.get("spec") or {}).get("taints") or ()
    return NodeInfo(
        name=doc["metadata"]["name"],
        internal_ips=tuple(
            a["address"]
            for a in addresses
            if isinstance(a, dict) and a.get("type") == "InternalIP" and a.get("address")
        ),
        cpu_cores=cpu_cores(cpu) if isinstance(cpu, str) else None,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        taints=tuple(
            Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
            for t in taints
            if isinstance(t, dict)
        ),
    )


class NodeCache:
    """name -> NodeInfo; `inventory()` is rebuilt lazily after a change."""

    def __init__(self) -> None:
        self._nodes: dict[NodeName, NodeInfo] = {}
        self._inventory: NodeInventory | None = NodeInventory()

    def replace(self, nodes: Iterable[NodeInfo]) -> None:
        """A full list: the cache becomes exactly these nodes."""
        self._nodes = {n.name: n for n in nodes}
        self._inventory = None

    def apply(self, event_type: str, doc: Any) -> bool:
        """One watch event; False when the object is not a readable node (ignored)."""
        try:
            node = node_info(doc)
        except (AttributeError, KeyError, TypeError, ValueError):
            return False
        if event_type == "DELETED":
            if self._nodes.pop(node.name, None) is not None:
                self._inventory = None
        elif self._nodes.get(node.name) != node:
            # Most node updates are heartbeats and conditions: nothing we keep changes.
            self._nodes[node.name] = node
            self._inventory = None
        return True

    def inventory(self) -> NodeInventory:
        if self._inventory is None:
            self._inventory = NodeInventory.from_nodes(list(self._nodes.values()))
        return self._inventory

    def names(self) -> list[NodeName]:
        return list(self._nodes)

    def get(self, name: NodeName) -> NodeInfo | None:
        return self._nodes.get(name)

    def __len__(self) -> int:
        return len(self._nodes)


def remap_nodes(
    snapshot: Snapshot, inventory: NodeInventory, gone: Collection[NodeName]
) -> Snapshot:
    """`snapshot` as the node cache now reads it (the same object when nothing changes):
    removed nodes' values dropped, and values kept under an `instance` address no node had
    then moved to the node that has it now."""
    metrics = dict(snapshot.metrics)
    for name, series in snapshot.metrics.items():
        values = {n: v for n, v in series.values.items() if n not in gone}
        for address, node in inventory.by_ip.items():
            if address in values and node not in gone:
                value = values.pop(address)
                values.setdefault(node, value)
        if values != series.values:
            metrics[name] = replace(series, values=values)
    return snapshot if metrics == snapshot.metrics else replace(snapshot, metrics=metrics)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 Toleration.ToleratesTaint: an empty effect matches every effect, an empty
        key with Exists every key; Equal (the default) compares the values."""
        if (self.effect and self.effect != taint.effect) or (self.key and self.key != taint.key):
            return False
        return self.operator == "Exists" or (
            self.operator in ("", "Equal") and self.value == taint.value
        )


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Which nodes a pod may go to whatever its scores: its nodeSelector and the taints it
    tolerates (the scheduler's NodeAffinity nodeSelector part and TaintToleration)."""

    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]

    def allows(self, node: NodeInfo | None) -> bool:
        """The pod may go there (a node we know nothing of: it may)."""
        if node is None:
            return True
        if self.node_selector:
            labels = node.label_map
            if any(labels.get(k) != v for k, v in self.node_selector.items()):
                return False
        return all(
            any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
            if taint.effect in SCHEDULING_EFFECTS
        )


ANYWHERE = Eligibility({}, ())


def read_eligibility(pod: Any) -> Eligibility:
    """The pod's nodeSelector and tolerations (malformed entries are left out)."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(spec, dict):
        return ANYWHERE
    selector, tolerations = spec.get("nodeSelector"), spec.get("tolerations")
    return Eligibility(
        {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {},
        tuple(
            Toleration(*(str(t.get(f) or "") for f in ("key", "operator", "value", "effect")))
            for t in (tolerations if isinstance(tolerations, list) else ())
            if isinstance(t, dict)
        ),
    )
