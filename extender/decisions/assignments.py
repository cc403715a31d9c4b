"""What a pod watch event means for placement: a pod just assigned to a node, nominated
to one, no longer holding one, or nothing. Pure. The watch also sees updates of pods
assigned long ago, so an assignment counts only when recent (`PodScheduled`) and once.
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
    """The pod, once it no longer runs on the node it ran on: what the metric still shows
    of it is credited there (herd.departure). None while it is only being deleted (it may
    run out its grace period) or was never on a node."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pod without a node yet, nominated to none."""

    uid: str


@dataclass(frozen=True, slots=True)
class Nominated:
    """A pod without a node, nominated to one (`status.nominatedNodeName`): load about to
    land there, which kube-scheduler counts when it filters other pods, as the herd guard."""

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
    """None: counted with the policy's default."""
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
    raw_status, spec = pod.get("status"), pod.get("spec")
    status: dict[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    if not isinstance(spec, dict):
        spec = None
    node = spec.get("nodeName") if spec is not None else None
    node = node if isinstance(node, str) and node else None
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    owners, labels = meta.get("ownerReferences"), meta.get("labels")
    stopped = event_type == "DELETED" or status.get("phase") in TERMINAL_PHASES
    if stopped or meta.get("deletionTimestamp"):
        if not stopped or spec is None or node is None:
            return Released(uid)
        ran = PodFacts(uid, name, namespace, "", _cores(spec, status), node, None, owners, labels)
        return Released(uid, ran)
    if spec is None or node is None:
        nominated = status.get("nominatedNodeName")
        if spec is None or not isinstance(nominated, str) or not nominated:
            return Waiting(uid)
        return Nominated(uid, namespace, name, nominated, _cores(spec, status), owners, labels)
    assigned_at = _scheduled_at(status) or api_time(meta.get("creationTimestamp"))
    return Assigned(uid, namespace, name, node, _cores(spec, status), assigned_at, owners, labels)


def is_recent(assigned: Assigned, now: float, span: float) -> bool:
    """The assignment happened within the last `span` seconds (the herd guard's settle +
    window); an unknown time is not recent."""
    at = assigned.assigned_at
    return at is not None and now - at <= span + CLOCK_SKEW


class AssignmentLog:
    """UIDs already counted, each kept for `keep` seconds (and at most `capacity`)."""

    def __init__(self, keep: float, capacity: int = 100_000) -> None:
        self._keep = keep
        self._capacity = capacity
        self._seen: OrderedDict[str, float] = OrderedDict()  # uid -> when counted, oldest first

    def first_time(self, uid: str, now: float) -> bool:
        """Record `uid`; True when it was not counted within the window."""
        while self._seen and now - next(iter(self._seen.values())) > self._keep:
            self._seen.popitem(last=False)
        if uid in self._seen:
            return False
        self._seen[uid] = now
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)
