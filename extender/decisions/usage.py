"""What pods really use, as Prometheus measured it (per workload, per young pod), and the
rule that names a pod's workload, kube-prometheus' (kubernetes-mixin `rules/apps.libsonnet`,
`namespace_workload_pod:kube_pod_owner:relabel`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TEMPLATE_HASH = "pod-template-hash"


@dataclass(frozen=True, slots=True, order=True)
class WorkloadKey:
    namespace: str
    kind: str
    """Lower case, as kube-prometheus' `workload_type` label."""
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class WorkloadUse:
    """The measured CPU use of one workload's running pods."""

    cores: float
    """The quantile (herdGuard.quantile) of its pods' use: what a burst is counted at."""
    pods: int
    median: float | None = None
    """What one more pod of it most likely uses (None when the query gives none)."""


@dataclass(frozen=True, slots=True)
class UsageTable:
    """One fetch of the measured use, swapped in whole by the refresher."""

    workloads: Mapping[WorkloadKey, WorkloadUse] = field(default_factory=dict)
    pods: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(namespace, pod name) -> the pod's own measured use in cores, for young pods."""
    fetched_at: float | None = None
    error: str | None = None
    """The last fetch's error, beside the last good values."""


EMPTY = UsageTable()


def workload_of(namespace: str, owners: Any, labels: Any) -> WorkloadKey | None:
    """From `metadata.ownerReferences` and `.labels` as sent; None: a bare pod or an owner
    we cannot name."""
    if not isinstance(owners, list):
        return None
    owner = next(
        (o for o in owners if isinstance(o, dict) and o.get("controller") is True),
        owners[0] if len(owners) == 1 and isinstance(owners[0], dict) else None,
    )
    if owner is None:
        return None
    kind, name = owner.get("kind"), owner.get("name")
    if not isinstance(kind, str) or not isinstance(name, str) or not name:
        return None
    if kind == "ReplicaSet":
        suffix = labels.get(TEMPLATE_HASH) if isinstance(labels, dict) else None
        if isinstance(suffix, str) and suffix and name.endswith("-" + suffix):
            return WorkloadKey(namespace, "deployment", name[: -len(suffix) - 1])
        return WorkloadKey(namespace, "replicaset", name)
    if kind in ("StatefulSet", "DaemonSet", "Job"):
        return WorkloadKey(namespace, kind.lower(), name)
    return None
