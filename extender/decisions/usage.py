"""What pods really use, as Prometheus measured it: per workload and per young pod.

A pod requests one figure and uses another. The herd guard counts a placed pod until the
node metric shows it, and what it counts is the pod's expected use: the measured use of
its workload's running pods (a quantile), or, for a pod already running, its own measured
use. The refresher fetches both in the background (metrics.usage); this module holds the
answer and the rule that names a pod's workload. Pure: no I/O.

The workload names are kube-prometheus' (kubernetes-mixin `rules/apps.libsonnet`, the
`namespace_workload_pod:kube_pod_owner:relabel` rules): a pod owned by a ReplicaSet that
a Deployment made belongs to the Deployment (the ReplicaSet's name less its
`pod-template-hash`), a StatefulSet's, DaemonSet's or Job's pod to that owner, a bare
ReplicaSet's pod to the ReplicaSet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TEMPLATE_HASH = "pod-template-hash"
"""The label the Deployment controller puts on a ReplicaSet's pods: the ReplicaSet's name
is the Deployment's name, a dash and this hash."""


@dataclass(frozen=True, slots=True, order=True)
class WorkloadKey:
    namespace: str
    kind: str
    """Lower case, as kube-prometheus' `workload_type` label: deployment, statefulset,
    daemonset, job, replicaset."""
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class WorkloadUse:
    """The measured CPU use of one workload's running pods."""

    cores: float
    """The quantile (herdGuard.quantile, p90 by default) of its pods' use, in cores."""
    pods: int
    """Running pods measured."""
    median: float | None = None
    """The median of its pods' use (None when the usage query gives none): what one more
    pod of it most likely uses, where the quantile is what a burst of them is counted at."""


@dataclass(frozen=True, slots=True)
class UsageTable:
    """One fetch of the measured use, swapped in whole by the refresher."""

    workloads: Mapping[WorkloadKey, WorkloadUse] = field(default_factory=dict)
    pods: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """(namespace, pod name) -> the pod's own measured use in cores, for young pods."""
    fetched_at: float | None = None
    """None until the first good fetch."""
    error: str | None = None
    """The last fetch's error, beside the last good values."""


EMPTY = UsageTable()


def workload_of(namespace: str, owners: Any, labels: Any) -> WorkloadKey | None:
    """The workload of a pod from its `metadata.ownerReferences` and `metadata.labels`
    (decoded JSON, unchecked); None for a bare pod or an owner we cannot name."""
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
