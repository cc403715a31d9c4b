"""What a pod watch event means for placement: a pod just assigned to a node, a pod that
no longer holds one, or nothing. Pure: the watch loop (informer.py) feeds it events.

The herd guard counts every pod that gets `spec.nodeName`, whoever bound it, until the
node metric shows it (`settle` plus the metric's window after the bind: herd.py). A
watch started from "now" also sees updates of pods that were assigned long ago (status
changes of running pods), so an assignment counts only when it is recent: the
`PodScheduled` condition the API server sets on binding (or, for a pod created with its
node, the creation time) is within that span. Each UID counts once (`AssignmentLog`),
so the same pod's later updates, or the event of a pod we bound ourselves, add nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from extender.decisions.pods import PodFacts, api_time
from extender.decisions.resources import PodError, cpu_request

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
CLOCK_SKEW = 5.0
"""Seconds an API server's timestamps may differ from ours and still count as recent."""


@dataclass(frozen=True, slots=True)
class Assigned:
    """A pod that holds `node`: its CPU request and when the API says it was assigned."""

    uid: str
    namespace: str
    name: str
    node: str
    cores: float | None
    assigned_at: float | None
    owners: Any = None
    """`metadata.ownerReferences` as sent (read only when the pod is counted)."""
    labels: Any = None


@dataclass(frozen=True, slots=True)
class Released:
    """A pod deleted, being deleted, or finished: it holds nothing any more."""

    uid: str
    gone: PodFacts | None = None
    """The pod, once it no longer runs (deleted, or finished) on the node it ran on: what
    the metric still shows of it is credited there (herd.departure). None while it is only
    being deleted (it may run out its grace period) or was never on a node."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pod without a node yet, nominated to none."""

    uid: str


@dataclass(frozen=True, slots=True)
class Nominated:
    """A pod without a node, nominated to one (`status.nominatedNodeName`): load about to
    land there. kube-scheduler nominates a preemptor to the node its victims are leaving
    (and, with NominatedNodeNameForExpectation, a pod whose binding waits on Permit or
    PreBind); it counts the nominated pods of equal or higher priority on their node when
    it filters other pods, and so does the herd guard (decisions.state.nominate)."""

    uid: str
    namespace: str
    name: str
    node: str
    cores: float | None
    owners: Any = None
    labels: Any = None


PodChange = Assigned | Released | Waiting | Nominated


def _scheduled_at(status: Any) -> float | None:
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "True"
        ):
            return api_time(condition.get("lastTransitionTime"))
    return None


def _cores(spec: dict[str, Any], status: dict[str, Any]) -> float | None:
    """The pod's CPU request as the scheduler counts a pod on its node (pods.cpu_request,
    with what its status says of resizes); None: counted with the policy's default."""
    try:
        return cpu_request(spec, status=status)
    except PodError:
        return None


def pod_change(event_type: str, pod: Any) -> PodChange | None:
    """What one watch event (`ADDED`, `MODIFIED`, `DELETED`) says; None when unreadable."""
    if not isinstance(pod, dict):
        return None
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not isinstance(uid := meta.get("uid"), str) or not uid:
        return None
    raw_status = pod.get("status")
    status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    spec = pod.get("spec")
    stopped = event_type == "DELETED" or status.get("phase") in TERMINAL_PHASES
    if stopped or meta.get("deletionTimestamp"):
        ran = spec.get("nodeName") if stopped and isinstance(spec, dict) else None
        if not isinstance(spec, dict) or not isinstance(ran, str) or not ran:
            return Released(uid)
        owners, labels = meta.get("ownerReferences"), meta.get("labels")
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        cores = _cores(spec, status)
        return Released(uid, PodFacts(uid, name, namespace, "", cores, ran, None, owners, labels))
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(node, str) or not node:
        nominated = status.get("nominatedNodeName")
        if not isinstance(spec, dict) or not isinstance(nominated, str) or not nominated:
            return Waiting(uid)
        return Nominated(
            uid=uid,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            node=nominated,
            cores=_cores(spec, status),
            owners=meta.get("ownerReferences"),
            labels=meta.get("labels"),
        )
    cores = _cores(spec, status)
    assigned_at = _scheduled_at(status) or api_time(meta.get("creationTimestamp"))
    namespace = str(meta.get("namespace") or "")
    return Assigned(
        uid=uid,
        namespace=namespace,
        name=str(meta.get("name") or ""),
        node=node,
        cores=cores,
        assigned_at=assigned_at,
        owners=meta.get("ownerReferences"),
        labels=meta.get("labels"),
    )


def is_recent(assigned: Assigned, now: float, span: float) -> bool:
    """True when the assignment happened within the last `span` seconds, the time the
    herd guard counts a pod (settle + window); an unknown time is not recent."""
    at = assigned.assigned_at
    return at is not None and now - at <= span + CLOCK_SKEW


class AssignmentLog:
    """UIDs already counted, each kept for `keep` seconds: bounded by the pods assigned
    within that window (and by `capacity`), whatever the cluster size."""

    def __init__(self, keep: float, capacity: int = 100_000) -> None:
        self._keep = keep
        self._capacity = capacity
        self._seen: OrderedDict[str, float] = OrderedDict()  # uid -> when counted, oldest first

    def first_time(self, uid: str, now: float) -> bool:
        """Record `uid`; True when it was not counted within the window."""
        self._expire(now)
        if uid in self._seen:
            return False
        self._seen[uid] = now
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True

    def _expire(self, now: float) -> None:
        while self._seen:
            uid, at = next(iter(self._seen.items()))
            if now - at <= self._keep:
                return
            del self._seen[uid]

    def __len__(self) -> int:
        return len(self._seen)
