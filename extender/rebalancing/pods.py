"""The running pods the rebalancer re-checks, and the rules that keep a pod where it is
whatever its node looks like (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.decisions.pods import PodFacts, api_time, read_pod
from extender.policy.sections import RebalanceSettings

OPT_OUT_ANNOTATION = "decice.io/rebalance"  # `decice.io/rebalance: "false"` keeps a pod where it is
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""Set by the kubelet on the API's copy of a static pod."""
NEVER_MOVED_KINDS = frozenset({"DaemonSet", "Node", "Job"})
"""Owners whose pods are never evicted: a DaemonSet's pod would come back on the same
node, a Node owns mirror pods of static pods, and an evicted Job pod counts against the
Job's backoffLimit."""


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A running pod as the rebalancer sees it (read from the API's v1.Pod)."""

    facts: PodFacts
    owner_kind: str | None  # the controller ownerReference's kind; None: a bare pod
    created: float | None  # metadata.creationTimestamp, Unix seconds
    opted_out: bool = False
    mirror: bool = False
    terminating: bool = False  # metadata.deletionTimestamp is set
    labels: Mapping[str, str] = field(default_factory=dict)


def read_running_pod(doc: Any) -> RunningPod:
    """A v1.Pod (decoded JSON) as a RunningPod; PodError names a bad field."""
    facts = read_pod(doc)
    meta = doc["metadata"]  # read_pod checked it is an object
    refs = meta.get("ownerReferences")
    refs = refs if isinstance(refs, list) else []
    controllers = [r for r in refs if isinstance(r, dict) and r.get("controller") is True]
    owner = controllers[-1].get("kind") if controllers else None
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    labels = facts.labels if isinstance(facts.labels, dict) else {}
    return RunningPod(
        facts=facts,
        owner_kind=owner if isinstance(owner, str) else None,
        created=api_time(meta.get("creationTimestamp")),
        opted_out=str(annotations.get(OPT_OUT_ANNOTATION, "")).lower() == "false",
        mirror=MIRROR_ANNOTATION in annotations,
        terminating=meta.get("deletionTimestamp") is not None,
        labels={str(k): v for k, v in labels.items() if isinstance(v, str)},
    )


def waits_for_room(doc: Any, now: float, patience: float) -> PodFacts | None:
    """A pending pod the scheduler found no node for (PodScheduled False, Unschedulable),
    created less than `patience` (herdGuard.waitForRoom) ago, as PodFacts; else None. Past
    its wait our filter lets it overflow, so a pod stuck for another reason holds no room
    for long. PodError names a bad field."""
    status = doc.get("status") if isinstance(doc, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    unschedulable = isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )
    if not unschedulable:
        return None
    facts = read_pod(doc)
    created = api_time(doc["metadata"].get("creationTimestamp"))
    if facts.node_name or created is None or now - created >= patience:
        return None
    return facts


def protection(pod: RunningPod, rules: RebalanceSettings, now: float) -> str | None:
    """Why this pod must not be moved now, or None: only pods a controller recreates."""
    if pod.terminating:
        return "terminating"
    if pod.mirror or pod.owner_kind == "Node":
        return "static pod"
    if pod.owner_kind is None:
        return "bare pod (no controller recreates it)"
    if pod.owner_kind in NEVER_MOVED_KINDS:
        return f"{pod.owner_kind} pod"
    if pod.opted_out:
        return f'annotation {OPT_OUT_ANNOTATION}: "false"'
    if not pod.facts.node_name:
        return "not on a node"
    if pod.created is None or now - pod.created < rules.min_age:
        return f"younger than minAge {rules.min_age:g}s"
    return None
