"""What we know of a pod: one reader of a v1.Pod (the filter path's and the API path's,
so the herd guard counts the same CPU either way), and the bounded memory of pods between
the scheduler's filter call and its bind call, which carries only the pod's identity.
"""

from __future__ import annotations

import datetime
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from extender.decisions.model import NodeName, Snapshot
from extender.decisions.resources import PodError as PodError  # what read_pod raises
from extender.decisions.resources import cpu_request
from extender.decisions.usage import WorkloadKey, workload_of

if TYPE_CHECKING:
    from extender.policy.policies import Policy

POLICY_ANNOTATION = "decice.io/policy"
"""The pod annotation that picks a named policy (config.Settings.policies)."""

DEFAULT_SCHEDULER = "default-scheduler"
"""What the API server writes into an empty `spec.schedulerName`."""


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE = re.compile(_LABEL)
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def name_problem(value: str, *, namespace: bool = False) -> str | None:
    """What a pod name, node name or namespace breaks of the Kubernetes rules, or None:
    checked before a name reaches a URL, a log line or an API call."""
    pattern, limit, what = (
        (_NAMESPACE, 63, "an RFC 1123 label")
        if namespace
        else (_SUBDOMAIN, 253, "an RFC 1123 subdomain")
    )
    if len(value) > limit or not pattern.fullmatch(value):
        return f"is not a valid Kubernetes name ({what})"
    return None


def shown(value: str, limit: int = 80) -> str:
    """A request value fit for a log line or an answer: escaped, capped."""
    text = value if value.isprintable() else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def api_time(value: Any) -> float | None:
    """An RFC 3339 time as the API writes it, in epoch seconds; None when malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


@dataclass(frozen=True, slots=True)
class PodFacts:
    """Identity, scheduler, effective CPU request and node of one pod."""

    uid: str
    name: str
    namespace: str
    scheduler_name: str
    cpu_request: float | None
    """Cores, as the scheduler counts them (resources.cpu_request); None when nothing asks."""
    node_name: str = ""
    policy: str | None = None
    """The named policy the pod asks for (annotation decice.io/policy); None: the default."""
    owners: Any = None
    """`metadata.ownerReferences` as sent, unchecked (as `labels` and `created`)."""
    labels: Any = None
    prefers: bool = False
    """The pod weighs nodes itself (`prefers_nodes`): our shortlist does not narrow them."""
    created: Any = None
    """`metadata.creationTimestamp`: herdGuard.waitForRoom counts from it."""

    @property
    def workload(self) -> WorkloadKey | None:
        """Read when the herd guard counts the pod, not on every filter call."""
        return workload_of(self.namespace, self.owners, self.labels)


def _str(obj: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    if key not in obj and required:
        raise PodError(f"{where}: missing field {key!r}")
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise PodError(f"{where}.{key}: must be str, got {type(value).__name__}")
    return value


def read_pod(pod: Any, where: str = "Pod") -> PodFacts:
    """A v1.Pod (decoded JSON) as PodFacts; `PodError` names the first bad field."""
    if not isinstance(pod, dict):
        raise PodError(f"{where}: must be an object, got {type(pod).__name__}")
    if "metadata" not in pod:
        raise PodError(f"{where}: missing field 'metadata'")
    meta = pod["metadata"]
    if not isinstance(meta, dict):
        raise PodError(f"{where}.metadata: must be dict, got {type(meta).__name__}")
    if (spec := pod.get("spec")) is None:
        spec = {}
    if not isinstance(spec, dict):
        raise PodError(f"{where}.spec: must be an object")
    if not isinstance(annotations := meta.get("annotations"), dict):
        annotations = {}
    return PodFacts(
        uid=_str(meta, "uid", f"{where}.metadata"),
        name=_str(meta, "name", f"{where}.metadata", required=True),
        namespace=_str(meta, "namespace", f"{where}.metadata") or "default",
        scheduler_name=_str(spec, "schedulerName", f"{where}.spec") or DEFAULT_SCHEDULER,
        cpu_request=cpu_request(spec, f"{where}.spec", status=pod.get("status")),
        node_name=_str(spec, "nodeName", f"{where}.spec"),
        policy=policy if isinstance(policy := annotations.get(POLICY_ANNOTATION), str) else None,
        owners=meta.get("ownerReferences"),
        labels=meta.get("labels"),
        prefers=prefers_nodes(spec),
        created=meta.get("creationTimestamp"),
    )


PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def prefers_nodes(spec: dict[str, Any]) -> bool:
    """The pod spec asks kube-scheduler to weigh nodes: a preferred (anti-)affinity term or
    a `ScheduleAnyway` topology spread constraint; anything malformed is no preference."""
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind)
            if isinstance(terms, dict) and terms.get(PREFERRED):
                return True
    spread = spec.get("topologySpreadConstraints")
    return isinstance(spread, list) and any(
        isinstance(c, dict) and c.get("whenUnsatisfiable") == "ScheduleAnyway" for c in spread
    )


@dataclass(frozen=True, slots=True)
class PodMemo:
    """What we decided for one pod: read by the bind guard and by /explain."""

    facts: PodFacts
    rejected: frozenset[str]
    """Nodes our latest filter call for this pod rejected."""
    candidates: tuple[str, ...] | None = None
    """The nodes that call was asked about, kept only for small calls: a 5,000-name copy
    per pod would cost the filter path time and tens of MB."""
    asked: int = 0
    at: float = 0.0
    snapshot: Snapshot | None = None
    """The snapshot the answer came from, while it is one of the last few (PodMemory)."""
    stale: frozenset[str] = frozenset()
    herd: Mapping[str, float] = field(default_factory=dict)
    """With the snapshot and `stale`, the table's exact inputs."""
    node: str = ""
    """Where the pod went, once we bound it."""
    policy: Policy | None = None
    """None: the pod named a policy that does not exist."""
    room_wait_since: float | None = None
    """Since when the pod has fitted on no node it was offered (headroom.py)."""
    shortlisted: int | None = None
    """How many nodes the filter passed when it passed only our best (decisions.shortlist)."""
    expected: str = ""
    """What the herd guard counted the pod at once placed, and why (estimate.Expectation)."""


CANDIDATES_KEPT_UP_TO = 256
SNAPSHOTS_KEPT = 8
"""Distinct snapshots the memos may hold on to: at 5,000 nodes one is a few MB, so older
decisions keep their summary only."""


class PodMemory:
    """uid -> PodMemo, least recently decided dropped first."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._items: OrderedDict[str, PodMemo] = OrderedDict()
        self._by_name: dict[tuple[str, str], str] = {}
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()  # id() -> the snapshot
        self._capacity = capacity

    def remember(self, memo: PodMemo) -> None:
        uid = memo.facts.uid
        if not uid:
            return
        if memo.snapshot is not None and id(memo.snapshot) not in self._snapshots:
            self._keep(memo.snapshot)
        self._items[uid] = memo
        self._items.move_to_end(uid)
        self._by_name[(memo.facts.namespace, memo.facts.name)] = uid
        while len(self._items) > self._capacity:
            _, old = self._items.popitem(last=False)
            key = (old.facts.namespace, old.facts.name)
            if self._by_name.get(key) == old.facts.uid:
                del self._by_name[key]

    def _keep(self, snapshot: Snapshot) -> None:
        self._snapshots[id(snapshot)] = snapshot
        if len(self._snapshots) <= SNAPSHOTS_KEPT:
            return
        _, dropped = self._snapshots.popitem(last=False)
        for uid, memo in self._items.items():
            if memo.snapshot is dropped:
                self._items[uid] = replace(memo, snapshot=None)

    def placed(self, uid: str, node: str) -> None:
        memo = self._items.get(uid)
        if memo is not None:
            self._items[uid] = replace(memo, node=node)

    def expect(self, uid: str, text: str) -> None:
        memo = self._items.get(uid)
        if memo is not None:
            self._items[uid] = replace(memo, expected=text)

    def get(self, uid: str) -> PodMemo | None:
        return self._items.get(uid)

    def find(self, namespace: str, name: str) -> PodMemo | None:
        uid = self._by_name.get((namespace, name))
        return None if uid is None else self._items.get(uid)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class Preemption:
    at: float
    victims: Mapping[NodeName, object]
    """node -> the MetaVictims /preempt accepted there."""


class Preemptions:
    """The victims /preempt accepted, by preemptor UID (decisions.preemption), kept past
    the victims' graceful termination and the scheduler's retries of the preemptor."""

    def __init__(self, seconds: float = 300.0, pods: int = 4096) -> None:
        self._seconds, self._pods = seconds, pods
        self._by_uid: OrderedDict[str, Preemption] = OrderedDict()

    def remember(self, uid: str, victims: Mapping[NodeName, object], now: float) -> None:
        self._by_uid.pop(uid, None)
        if victims:
            self._by_uid[uid] = Preemption(now, victims)
            while len(self._by_uid) > self._pods:
                self._by_uid.popitem(last=False)

    def get(self, uid: str, now: float) -> Preemption | None:
        """`uid`'s accepted preemption, while remembered."""
        found = self._by_uid.get(uid)
        if found is not None and now - found.at > self._seconds:
            del self._by_uid[uid]
            return None
        return found

    def __len__(self) -> int:
        return len(self._by_uid)
