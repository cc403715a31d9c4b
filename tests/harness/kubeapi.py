"""A loopback fake kube-apiserver: the one every test that talks to Kubernetes uses.

It answers the few paths the extender calls with the paths, status codes and bodies
of a real kube-apiserver (see tests/fixtures/kube-apiserver/):

    POST  /api/v1/namespaces/{ns}/pods/{name}/binding
    POST  /api/v1/namespaces/{ns}/pods/{name}/eviction   (policy/v1 Eviction, judged by the
          PodDisruptionBudgets below; deleteOptions.dryRun ["All"] checks without a change)
    GET   /api/v1/namespaces/{ns}/pods/{name}
    PATCH /api/v1/namespaces/{ns}/pods/{name}   (merge / strategic merge: labels, annotations)
    GET   /api/v1/nodes/{name}
    PATCH /api/v1/nodes/{name}   (JSON patch, merge, strategic merge: spec.taints,
          spec.unschedulable, labels, annotations; metadata.resourceVersion is a precondition)
    GET   /api/v1/pods, /api/v1/nodes           (lists; honour limit / continue)
    GET   /api/v1/namespaces/{ns}/pods          (list; pods also honour fieldSelector)
    GET   /apis/policy/v1/poddisruptionbudgets   (PodDisruptionBudgetList; limit / continue)
    GET   /apis/policy/v1/namespaces/{ns}/poddisruptionbudgets   (the same, one namespace)
    GET, POST /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]; PUT .../{name}
    GET   /api/v1/pods?watch=true, /api/v1/nodes?watch=true   (watch streams)
    POST  /apis/events.k8s.io/v1/namespaces/{ns}/events   (about pods, and about nodes in
          namespace default)
    POST  /apis/authorization.k8s.io/v1/selfsubjectaccessreviews   (allowed unless `deny`)

Like the real server it accepts a bind to a node that does not exist, and it answers a
second bind of a pod with 409 whatever the target. Faults are injected with
`fail_next`, `delay_next`, `break_watches`, `expire_history`, `block_evictions` (a
PodDisruptionBudget that refuses) and `break_leases`; a `token` turns on bearer
authentication. Leases are written with optimistic concurrency (a stale
resourceVersion is a 409 Conflict); `steal_lease` lets another holder take one.

PodDisruptionBudgets are real objects (`add_pdb`, `set_pdb_status`, `remove_pdb`): an
eviction finds the budgets of the pod's namespace whose selector matches its labels
(`label_selector_matches`) and, as upstream's EvictionREST, refuses with 500 when there
are several, 429 when the one is not processed yet or allows no disruption, else takes
one disruption off it (status.disruptionsAllowed - 1) and deletes the pod. Nothing plays
the disruption controller: a budget's status changes only through these helpers and
evictions. Every Running pod counts as ready (the fake has no kubelet).

Every change of a pod or node (the helpers below, a bind, a patch) takes the next
resourceVersion and is kept in a bounded per-resource history, so a watch from a
resourceVersion replays what came after it, then streams changes as they happen:
`{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`, one JSON object per
line, chunked, until `timeoutSeconds` (default 30 s, at most 60 s here). Unlike the real
server, a watch without resourceVersion (or "0") replays nothing: it streams new
changes only. A resourceVersion older than the history gets the real server's 410
`Expired` ERROR event. An open watch does not count as in flight for `wait_idle`.

    with FakeKubeAPI() as api:
        api.add_pod("decice", "p1", "uid-1")
        client = client_for(api)
        api.assign("decice", "p1", "node-1")   # another binder binds it: a MODIFIED event
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import re
import secrets
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client

from tests.harness.loopback import LOCALHOST, LoopbackServer

JSON = dict[str, Any]

DEFAULT_USER = "system:serviceaccount:decice:nobody"
_CREATED = "2026-11-23T02:41:05Z"

_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_EVICTION = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_NAMESPACED_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_LEASES = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$")
_LEASE_GROUP = "coordination.k8s.io"
_EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")
_SUBDOMAIN_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9-])?")
#: IsDNS1123Subdomain's message (event-node-bad-generatename.json).
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
#: The characters of a generated name's 5-character suffix (upstream's SimpleNameGenerator).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: events.k8s.io/v1 Event fields in Go's declaration order; an ObjectReference's.
_EVENT_FIELDS = (
    "eventTime",
    "series",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "regarding",
    "related",
    "note",
    "type",
    "deprecatedSource",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
)
_EVENT_NULLABLE = ("deprecatedFirstTimestamp", "deprecatedLastTimestamp")
_REFERENCE_FIELDS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
)
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
_NODES = "/api/v1/nodes"
_NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")
_POLICY = "policy"
_PDBS = "/apis/policy/v1/poddisruptionbudgets"
_NAMESPACED_PDBS = re.compile(r"^/apis/policy/v1/namespaces/([^/]+)/poddisruptionbudgets$")
_PODS = "/api/v1/pods"
_COLLECTIONS = {_PODS: "pods", _NODES: "nodes"}

#: Content-Type of a watch stream (fixture watch-pods.json).
WATCH_CONTENT_TYPE = "application/json;stream=watch"
#: Server-side end of a watch without timeoutSeconds, and the cap of any: the real server
#: picks 30-60 min; a test must not leave a stream open that long.
DEFAULT_WATCH_TIMEOUT = 30.0
MAX_WATCH_TIMEOUT = 60.0
#: The merge patches this fake applies; the 415 message lists what the real server accepts.
_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_JSON_PATCH = "application/json-patch+json"
_UNSUPPORTED_PATCH = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
    "application/strategic-merge-patch+json"
)
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
#: The pod fields a fieldSelector may name (upstream's pod field label conversion).
_POD_FIELDS: dict[str, tuple[str, str]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.restartPolicy": ("spec", "restartPolicy"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.phase": ("status", "phase"),
    "status.podIP": ("status", "podIP"),
    "status.nominatedNodeName": ("status", "nominatedNodeName"),
}
#: apiVersion of an owner by kind (ownerReferences of add_pod).
_OWNER_API = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "Node": "v1",
}
#: A Lease's spec fields in Go's declaration order; the MicroTime ones.
_LEASE_SPEC = (
    "holderIdentity",
    "leaseDurationSeconds",
    "acquireTime",
    "renewTime",
    "leaseTransitions",
    "strategy",
    "preferredHolder",
)
_LEASE_TIMES = ("acquireTime", "renewTime")
#: Upstream EvictionREST's messages (evict-pdb-*.json, eviction.go).
_EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
_BUDGET_BLOCKED = (
    "The disruption budget {budget} needs {desired} healthy pods and has {current} currently"
)
_BUDGET_NOT_PROCESSED = "The disruption budget {budget} is still being processed by the server."
_MULTIPLE_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
#: The label block_evictions puts on a pod, and its budget selects.
TEST_BUDGET_LABEL = "decice.io/test-budget"
#: A LabelSelectorRequirement's operators (metav1.LabelSelectorOperator).
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
#: PodDisruptionBudgetStatus fields in Go's declaration order.
_PDB_STATUS = (
    "observedGeneration",
    "disruptedPods",
    "disruptionsAllowed",
    "currentHealthy",
    "desiredHealthy",
    "expectedPods",
    "conditions",
)
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The spec fields a node patch may change here (others: a loud 500, extend when needed).
_NODE_SPEC_PATCHABLE = ("taints", "unschedulable")
#: The 422 of a JSON patch that does not apply: a failed `test`, a missing path
#: (patch-node-taint-stale.json; upstream's NewGenericServerResponse without details).
_JSON_PATCH_FAILED = "the server rejected our request due to an error in our request"
#: A BOOKMARK carries an empty object of the watched kind with only its resourceVersion,
#: serialised as Go does (fixture watch-pods.json): a Pod's spec.containers has no
#: omitempty, so it is null; a Node's status holds the zero daemonEndpoints and nodeInfo
#: structs (as in list-nodes-limit-1.json, with empty strings).
_BOOKMARK_BODY: dict[str, dict[str, Any]] = {
    "pods": {"kind": "Pod", "spec": {"containers": None}, "status": {}},
    "nodes": {
        "kind": "Node",
        "spec": {},
        "status": {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                key: ""
                for key in (
                    "machineID",
                    "systemUUID",
                    "bootID",
                    "kernelVersion",
                    "osImage",
                    "containerRuntimeVersion",
                    "kubeletVersion",
                    "kubeProxyVersion",
                    "operatingSystem",
                    "architecture",
                )
            },
        },
    },
}


@dataclass(frozen=True)
class KubeRequest:
    """One request as the fake server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str] = field(repr=False)
    at: float = field(default_factory=time.monotonic, compare=False)
    """time.monotonic() when it arrived."""


def status_body(
    code: int, message: str, reason: str | None = None, details: JSON | None = None
) -> JSON:
    """A `Status` failure object exactly as kube-apiserver serialises it."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason is not None:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


_SUCCESS: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def _now() -> str:
    """RFC 3339 in seconds, UTC, as the API server writes condition and deletion times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _event_line(kind: str, obj: JSON) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


@dataclass(eq=False)
class _Watch:
    """One open watch stream: the lines it has still to send, and how it ends."""

    resource: str  # "pods" or "nodes"
    deadline: float  # time.monotonic() at which the server ends the stream
    bookmarks: bool
    pending: list[bytes]
    final: bool = False  # end once `pending` is sent (the 410 ERROR event)
    broken: bool = False  # break_watches(): cut without the terminating chunk
    connection: socket.socket | None = None


_Answer = tuple[int, JSON, dict[str, str]] | _Watch


class FakeKubeAPI:
    """Threaded HTTP server on 127.0.0.1 with a random port; `url` once started."""

    def __init__(
        self,
        *,
        token: str | None = None,
        user: str = DEFAULT_USER,
        history: int = 10_000,
        bookmark_interval: float = 1.0,
    ) -> None:
        """`history`: changes kept per resource for watches to replay (the oldest go
        first); `bookmark_interval`: seconds between two BOOKMARK events of a watch that
        allows them."""
        if history < 1:
            raise ValueError("history must keep at least one change")
        self.token = token
        self.user = user
        self.bookmark_interval = bookmark_interval
        self.requests: list[KubeRequest] = []
        self.events: list[JSON] = []  # created Events, as stored
        #: every eviction request, dry runs and injected faults included: (namespace, name,
        #: UID of its precondition or "")
        self.evictions: list[tuple[str, str, str]] = []
        #: the dry-run ones among them (deleteOptions.dryRun not empty), the same tuples
        self.dry_run_evictions: list[tuple[str, str, str]] = []
        self._leases: dict[tuple[str, str], JSON] = {}
        self._lease_fault: int | None = None
        self._pdbs: dict[tuple[str, str], JSON] = {}  # (namespace, name) -> as stored
        self._pods: dict[tuple[str, str], JSON] = {}
        self._nodes: dict[str, JSON] = {}
        self._binds: dict[tuple[str, str], int] = {}
        self._denied: set[tuple[str, str, str]] = set()  # (verb, group, resource[/sub])
        self._failures: list[int] = []
        self._watch_failures: list[int] = []
        self._delays: list[tuple[float, bool]] = []
        self._resource_version = 100
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._stopping = threading.Event()
        self._server: LoopbackServer | None = None
        self._port = 0  # the port it served on before `go_away`
        self._connections: set[socket.socket] = set()  # open client connections
        # (resourceVersion, serialised event line) per resource, oldest first
        self._history: dict[str, deque[tuple[int, bytes]]] = {
            "pods": deque(maxlen=history),
            "nodes": deque(maxlen=history),
        }
        # the oldest resourceVersion a watch may start from ("oldest - 1" upstream)
        self._horizon = {"pods": 0, "nodes": 0}
        self._watches: list[_Watch] = []
        self._changed = threading.Condition(self._lock)  # wakes the watch streams
        self._closed = False  # stop(): end every stream (not release_delays' _stopping)

    # --- lifecycle ---

    @property
    def url(self) -> str:
        """Where it serves; while away (`go_away`), where it will serve again."""
        if self._server is not None:
            return self._server.url
        if self._port:
            return f"http://{LOCALHOST}:{self._port}"
        raise RuntimeError("FakeKubeAPI is not started")

    def start(self) -> FakeKubeAPI:
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = LoopbackServer(handler, name="fake-kube-api")
        return self

    def stop(self) -> None:
        """End open watch streams (cleanly, within 2 s, else cut), release delays, close."""
        self._stopping.set()  # first: a stream stalled by delay_next must get going
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            if not self._changed.wait_for(lambda: not self._watches, 2.0):
                self._cut_watches()  # a stream stuck writing to a client that never reads
        if self._server is not None:
            self._server.close()

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- state ---

    def add_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        scheduler_name: str = "decice_sched",
        cpu_request: str | Sequence[str | None] | None = "500m",
        node_name: str | None = None,
        *,
        phase: str = "Pending",
        owner: tuple[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        created: str | float | None = None,
        priority: int = 0,
    ) -> JSON:
        """Add a pod (pending unless `phase`); `cpu_request` may list one request per
        container; `priority`: spec.priority, as admission resolves a priorityClassName.

        `owner`: (kind, name) of its controller, an ownerReferences entry with
        `controller: true` (ReplicaSet, StatefulSet, DaemonSet, Job; ("Node", node) makes a
        mirror pod, with the kubelet's `kubernetes.io/config.mirror` annotation).
        `created`: creationTimestamp, RFC 3339 or epoch seconds (now by default, as the API
        server stamps a pod it creates). A pod not Pending gets `status.startTime` (=
        creationTimestamp).
        """
        if phase not in _PHASES:
            raise ValueError(f"unknown pod phase {phase!r}")
        if owner is not None and owner[0] not in _OWNER_API:
            raise ValueError(f"unknown owner kind {owner[0]!r}")
        if created is None:
            stamp = _now()
        elif isinstance(created, str):
            stamp = created
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        requests = (
            [cpu_request]
            if cpu_request is None or isinstance(cpu_request, str)
            else list(cpu_request)
        )
        containers = [
            {
                "name": "c" if i == 0 else f"c{i}",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu}} if cpu is not None else {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
            for i, cpu in enumerate(requests)
        ]
        spec: JSON = {
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": scheduler_name,
            "priority": priority,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        if node_name is not None:
            spec["nodeName"] = node_name
        metadata: JSON = {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "",
            "generation": 1,
            "creationTimestamp": stamp,
        }
        if labels:
            metadata["labels"] = dict(labels)
        notes = dict(annotations or {})
        if owner is not None:
            kind, owner_name = owner
            if kind == "Node":
                notes.setdefault(
                    "kubernetes.io/config.mirror", uuid.uuid5(uuid.NAMESPACE_DNS, name).hex
                )
            reference: JSON = {
                "apiVersion": _OWNER_API[kind],
                "kind": kind,
                "name": owner_name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{kind}/{namespace}/{owner_name}")),
                "controller": True,
            }
            if kind != "Node":
                reference["blockOwnerDeletion"] = True
            metadata["ownerReferences"] = [reference]
        if notes:
            metadata["annotations"] = notes
        status: JSON = {"phase": phase}
        if phase != "Pending":
            status["startTime"] = stamp
        status["qosClass"] = "Burstable" if any(requests) else "BestEffort"
        with self._lock:
            metadata["resourceVersion"] = self._next_version()
            pod: JSON = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": _metadata_in_order(metadata),
                "spec": spec,
                "status": status,
            }
            replaced = self._pods.get((namespace, name))
            if replaced is not None:  # a pod recreated under the same name
                self._pods.pop((namespace, name))
                replaced["metadata"]["resourceVersion"] = self._next_version()
                self._record("pods", "DELETED", replaced)
                pod["metadata"]["resourceVersion"] = self._next_version()
            self._pods[(namespace, name)] = pod
            self._record("pods", "ADDED", pod)
        return pod

    def add_node(
        self, name: str, internal_ip: str | Sequence[str] | None, cpu: str | None = "4"
    ) -> JSON:
        ips = [internal_ip] if isinstance(internal_ip, str) else list(internal_ip or ())
        resources: JSON = {"memory": "8Gi", "pods": "110"}
        if cpu is not None:
            resources["cpu"] = cpu
        with self._lock:
            node: JSON = {
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                    "resourceVersion": self._next_version(),
                    "creationTimestamp": _CREATED,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
                },
                "spec": {},
                "status": {
                    "capacity": dict(resources),
                    "allocatable": dict(resources),
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    "addresses": [{"type": "InternalIP", "address": ip} for ip in ips]
                    + [{"type": "Hostname", "address": name}],
                },
            }
            kind = "MODIFIED" if name in self._nodes else "ADDED"
            self._nodes[name] = node
            self._record("nodes", kind, node)
        return node

    def update_node(
        self, name: str, cpu: str | None = None, internal_ip: str | Sequence[str] | None = None
    ) -> JSON:
        """Change a node's CPU capacity / allocatable or its InternalIP addresses (None:
        unchanged): a MODIFIED event. KeyError if there is no such node."""
        with self._lock:
            node = self._nodes[name]
            status = node["status"]
            if cpu is not None:
                status["capacity"]["cpu"] = cpu
                status["allocatable"]["cpu"] = cpu
            if internal_ip is not None:
                ips = [internal_ip] if isinstance(internal_ip, str) else list(internal_ip)
                status["addresses"] = [{"type": "InternalIP", "address": ip} for ip in ips] + [
                    a for a in status["addresses"] if a["type"] != "InternalIP"
                ]
            node["metadata"]["resourceVersion"] = self._next_version()
            self._record("nodes", "MODIFIED", node)
            return node

    def nodes(self) -> list[JSON]:
        """Copies of every node, in creation order."""
        with self._lock:
            return [copy.deepcopy(node) for node in self._nodes.values()]

    def node(self, name: str) -> JSON | None:
        """The node as stored (a copy, without kind / apiVersion as lists give it), or None."""
        with self._lock:
            node = self._nodes.get(name)
            return copy.deepcopy(node) if node is not None else None

    def taint_node(self, name: str, key: str, value: str = "", effect: str = "NoSchedule") -> JSON:
        """Another writer puts a taint on the node (replacing its own of the same key and
        effect): a new resourceVersion and a MODIFIED event, as a patch of spec.taints
        would. A NoExecute taint gets timeAdded, as the API server fills it. Returns a copy
        of the node; KeyError if there is no such node, ValueError for an unknown effect."""
        if effect not in _TAINT_EFFECTS:
            raise ValueError(f"unknown taint effect {effect!r}")
        with self._lock:
            node = self._nodes[name]
            taints = [
                t
                for t in node["spec"].get("taints", [])
                if (t.get("key"), t.get("effect")) != (key, effect)
            ]
            taints.append({"key": key, "value": value, "effect": effect})
            node["spec"] = {**node["spec"], "taints": _stored_taints(taints, [])}
            node["metadata"]["resourceVersion"] = self._next_version()
            self._record("nodes", "MODIFIED", node)
            return copy.deepcopy(node)

    def remove_node(self, name: str) -> None:
        """Delete a node: a DELETED event with its last state. KeyError if there is none."""
        with self._lock:
            node = self._nodes.pop(name)
            node["metadata"]["resourceVersion"] = self._next_version()  # as DELETED carries
            self._record("nodes", "DELETED", node)

    def assign(self, namespace: str, name: str, node: str) -> None:
        """Bind the pod as another binder (the default scheduler) would: what a successful
        POST binding does, but neither counted in `bind_count` nor in `requests`.
        KeyError if there is no such pod, ValueError if it is bound already."""
        with self._lock:
            pod = self._pods[(namespace, name)]
            if pod["spec"].get("nodeName"):
                raise ValueError(f"pod {namespace}/{name} is bound to {pod['spec']['nodeName']}")
            self._assign_locked(pod, node)

    def unschedulable(self, namespace: str, name: str, message: str) -> None:
        """The PodScheduled condition kube-scheduler writes when no node fits the pod
        (fixture filter-nodecache-nominated.json): a MODIFIED event."""
        with self._lock:
            pod = self._pods[(namespace, name)]
            condition = {
                "type": "PodScheduled",
                "observedGeneration": 1,
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
                "reason": "Unschedulable",
                "message": message,
            }
            pod["status"]["conditions"] = [condition]
            pod["metadata"]["resourceVersion"] = self._next_version()
            self._record("pods", "MODIFIED", pod)

    def set_phase(self, namespace: str, name: str, phase: str) -> None:
        """status.phase (Running, Succeeded, Failed, ...): a MODIFIED event."""
        if phase not in _PHASES:
            raise ValueError(f"unknown pod phase {phase!r}")
        with self._lock:
            pod = self._pods[(namespace, name)]
            pod["status"]["phase"] = phase
            pod["metadata"]["resourceVersion"] = self._next_version()
            self._record("pods", "MODIFIED", pod)

    def delete_pod(self, namespace: str, name: str, graceful: bool = False) -> None:
        """Delete a pod as the API server does (fixture watch-pods.json).

        graceful: set deletionTimestamp and deletionGracePeriodSeconds (the pod's
        terminationGracePeriodSeconds), generation + 1: one MODIFIED event; the pod stays
        until `delete_pod(..., graceful=False)` (its kubelet confirming). Not graceful:
        a pod not yet marked first gets deletionTimestamp with grace period 0 (MODIFIED),
        then is removed (DELETED, with a new resourceVersion), the two events the real
        server sent for a delete with gracePeriodSeconds=0. KeyError if there is no pod.
        """
        with self._lock:
            self._delete_locked(namespace, name, graceful)

    def _delete_locked(self, namespace: str, name: str, graceful: bool) -> None:
        pod = self._pods[(namespace, name)]
        if "deletionTimestamp" not in pod["metadata"]:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30) if graceful else 0
            self._mark_deleted(pod, grace)
            pod["metadata"]["resourceVersion"] = self._next_version()
            self._record("pods", "MODIFIED", pod)
        if graceful:
            return
        del self._pods[(namespace, name)]
        pod["metadata"]["resourceVersion"] = self._next_version()
        self._record("pods", "DELETED", pod)

    @property
    def resource_version(self) -> str:
        """The server's current resourceVersion (the last change's)."""
        with self._lock:
            return str(self._resource_version)

    def pod(self, namespace: str, name: str) -> JSON | None:
        with self._lock:
            return self._pods.get((namespace, name))

    def pods(self, namespace: str | None = None) -> list[JSON]:
        """Copies of every pod (of `namespace`), in creation order."""
        with self._lock:
            return [
                copy.deepcopy(pod)
                for (ns, _), pod in self._pods.items()
                if namespace is None or ns == namespace
            ]

    def bind_count(self, namespace: str, name: str) -> int:
        """How many binds of this pod the server accepted."""
        with self._lock:
            return self._binds.get((namespace, name), 0)

    def requests_to(self, method: str, path: str) -> list[KubeRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def lease(self, namespace: str, name: str) -> JSON | None:
        """The Lease as stored (a copy), or None."""
        with self._lock:
            lease = self._leases.get((namespace, name))
            return copy.deepcopy(lease) if lease is not None else None

    def steal_lease(
        self, namespace: str, name: str, holder: str, *, duration: int | None = None
    ) -> JSON:
        """Another replica takes the Lease (creating it if absent): holderIdentity, fresh
        acquireTime / renewTime, leaseTransitions + 1, a new resourceVersion. It does not
        renew it afterwards: the lease runs out `leaseDurationSeconds` later."""
        now = _micro_now()
        with self._lock:
            lease = self._leases.get((namespace, name))
            if lease is None:
                spec: JSON = {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": duration or 15,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                }
                lease = self._store_lease(namespace, name, spec, "fake-kube-api")
            else:
                spec = dict(lease["spec"])
                if spec.get("holderIdentity") != holder:
                    spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                spec.update(holderIdentity=holder, acquireTime=now, renewTime=now)
                if duration is not None:
                    spec["leaseDurationSeconds"] = duration
                lease["spec"] = _lease_spec(spec)
                lease["metadata"]["resourceVersion"] = self._next_version()
            return copy.deepcopy(lease)

    def delete_lease(self, namespace: str, name: str) -> None:
        """Remove the Lease (KeyError if there is none)."""
        with self._lock:
            del self._leases[(namespace, name)]

    # --- PodDisruptionBudgets (policy/v1) ---

    def add_pdb(
        self,
        namespace: str,
        name: str,
        *,
        match_labels: Mapping[str, str] | None = None,
        match_expressions: Sequence[Mapping[str, Any]] | None = None,
        select_all: bool = False,
        min_available: int = 1,
        disruptions_allowed: int = 0,
        processed: bool = True,
        current_healthy: int | None = None,
    ) -> JSON:
        """Store a PodDisruptionBudget shaped like the item of list-pdbs.json (a budget of
        the same name is replaced) and return a copy.

        Its selector: `match_labels` and / or `match_expressions` (LabelSelectorRequirement
        dicts: key, operator In / NotIn / Exists / DoesNotExist, values); `select_all` the
        empty selector `{}`, which selects every pod of the namespace; none of them no
        selector, which selects no pod. ValueError for a selector the API refuses.
        Its status is what the disruption controller would write: desiredHealthy =
        `min_available`, currentHealthy = expectedPods = `current_healthy` (by default
        min_available + disruptions_allowed), `disruptions_allowed`; observedGeneration =
        generation if `processed`, else one less (omitted when 0, as Go's omitempty).
        """
        if select_all and (match_labels or match_expressions):
            raise ValueError("select_all is the empty selector: no labels or expressions")
        selector: JSON | None = None
        if select_all or match_labels or match_expressions:
            selector = {}
            if match_labels:
                selector["matchLabels"] = dict(match_labels)
            if match_expressions:
                selector["matchExpressions"] = [
                    {k: (list(v) if k == "values" else v) for k, v in e.items()}
                    for e in match_expressions
                ]
        label_selector_matches(selector, {})  # ValueError for one the API would refuse
        with self._lock:
            pdb = self._store_pdb_locked(
                namespace,
                name,
                selector,
                min_available=min_available,
                disruptions_allowed=disruptions_allowed,
                processed=processed,
                current_healthy=current_healthy,
            )
            return copy.deepcopy(pdb)

    def set_pdb_status(
        self,
        namespace: str,
        name: str,
        *,
        disruptions_allowed: int | None = None,
        processed: bool | None = None,
        current_healthy: int | None = None,
    ) -> JSON:
        """Change a budget's status as the disruption controller would (None: unchanged):
        disruptionsAllowed, currentHealthy (= expectedPods), and whether it has seen the
        current generation. A new resourceVersion; returns a copy. KeyError if none."""
        with self._lock:
            pdb = self._pdbs[(namespace, name)]
            status = dict(pdb["status"])
            generation = pdb["metadata"]["generation"]
            if processed is not None:
                status["observedGeneration"] = generation if processed else generation - 1
            if disruptions_allowed is not None:
                status["disruptionsAllowed"] = disruptions_allowed
            if current_healthy is not None:
                status["currentHealthy"] = status["expectedPods"] = current_healthy
            pdb["status"] = _pdb_status(status)
            pdb["metadata"]["resourceVersion"] = self._next_version()
            return copy.deepcopy(pdb)

    def remove_pdb(self, namespace: str, name: str) -> None:
        """Delete a budget (KeyError if there is none)."""
        with self._lock:
            del self._pdbs[(namespace, name)]
            self._next_version()

    def pdb(self, namespace: str, name: str) -> JSON | None:
        """The budget as stored (a copy, without kind / apiVersion), or None."""
        with self._lock:
            pdb = self._pdbs.get((namespace, name))
            return copy.deepcopy(pdb) if pdb is not None else None

    def block_evictions(
        self, namespace: str, name: str, budget: str = "pdb-g", *, processed: bool = True
    ) -> None:
        """A PodDisruptionBudget `budget` covers the pod and allows no disruption: its
        evictions are refused with 429 as evict-pdb-blocked.json ("needs 1 healthy pods
        and has 1 currently"), or, `processed=False`, as evict-pdb-not-processed.json
        (retryAfterSeconds 10). As upstream, a pod that is Pending, Succeeded, Failed or
        terminating skips budgets and is deleted anyway.

        Made of the real objects: the pod gets the label `decice.io/test-budget: <budget>`
        (a new resourceVersion and a MODIFIED event, unless it has it already) and the
        budget (added or replaced) selects that label. KeyError if there is no such pod.
        """
        with self._lock:
            pod = self._pods[(namespace, name)]
            labels = pod["metadata"].get("labels") or {}
            if labels.get(TEST_BUDGET_LABEL) != budget:
                meta = {**pod["metadata"], "labels": {**labels, TEST_BUDGET_LABEL: budget}}
                pod["metadata"] = _metadata_in_order(meta)
                pod["metadata"]["resourceVersion"] = self._next_version()
                self._record("pods", "MODIFIED", pod)
            self._store_pdb_locked(
                namespace,
                budget,
                {"matchLabels": {TEST_BUDGET_LABEL: budget}},
                min_available=1,
                disruptions_allowed=0,
                processed=processed,
                current_healthy=None,
            )

    def allow_evictions(self, namespace: str, name: str) -> None:
        """Remove every budget that selects the pod (those of `block_evictions` and of
        `add_pdb` alike, so other pods they select are free too); nothing if there is no
        such pod."""
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return
            for key in self._budgets_of_locked(pod):
                del self._pdbs[key]
                self._next_version()

    def eviction_count(self, namespace: str, name: str, *, dry_run: bool | None = None) -> int:
        """How many eviction requests named this pod, whatever the answer (injected faults
        included): all of them, dry runs too, by default; only the dry runs with
        `dry_run=True`; only the real ones with `dry_run=False`."""
        with self._lock:
            every = sum(1 for ns, n, _ in self.evictions if (ns, n) == (namespace, name))
            dry = sum(1 for ns, n, _ in self.dry_run_evictions if (ns, n) == (namespace, name))
        if dry_run is None:
            return every
        return dry if dry_run else every - dry

    def _store_pdb_locked(
        self,
        namespace: str,
        name: str,
        selector: JSON | None,
        *,
        min_available: int,
        disruptions_allowed: int,
        processed: bool,
        current_healthy: int | None,
    ) -> JSON:
        healthy = (
            current_healthy
            if current_healthy is not None
            else min_available + max(disruptions_allowed, 0)
        )
        spec: JSON = {"minAvailable": min_available}
        if selector is not None:
            spec["selector"] = selector
        pdb: JSON = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"pdb/{namespace}/{name}")),
                "resourceVersion": self._next_version(),
                "generation": 1,
                "creationTimestamp": _CREATED,
            },
            "spec": spec,
            "status": _pdb_status(
                {
                    "observedGeneration": 1 if processed else 0,
                    "disruptionsAllowed": disruptions_allowed,
                    "currentHealthy": healthy,
                    "desiredHealthy": min_available,
                    "expectedPods": healthy,
                }
            ),
        }
        self._pdbs[(namespace, name)] = pdb
        return pdb

    def _budgets_of_locked(self, pod: JSON) -> list[tuple[str, str]]:
        """The keys of the budgets that select the pod, in etcd order (upstream's
        getPodDisruptionBudgets: its namespace's; an invalid selector selects nothing)."""
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        chosen = []
        for key in sorted(self._pdbs):
            if key[0] != namespace:
                continue
            try:
                if label_selector_matches(self._pdbs[key]["spec"].get("selector"), labels):
                    chosen.append(key)
            except ValueError:
                continue
        return chosen

    # --- faults ---

    # Watch requests have their own fault queue: the extender's watches reconnect in the
    # background, and must not use up a fault a test meant for a bind (or the reverse).

    def deny(self, verb: str, resource: str, group: str = "") -> None:
        """SelfSubjectAccessReviews for `verb` on `resource` ("pods/binding": with its
        subresource) in API `group` answer `allowed: false` from now on."""
        with self._lock:
            self._denied.add((verb, group, resource))

    def fail_next(self, status: int, times: int = 1, *, watch: bool = False) -> None:
        """Answer the next `times` requests (watch requests with `watch=True`, any other
        request without) with a `Status` of code `status`."""
        with self._lock:
            (self._watch_failures if watch else self._failures).extend([status] * times)

    def delay_next(self, seconds: float, times: int = 1, *, after: bool = False) -> None:
        """Stall the next `times` requests other than watches; `after=True` stalls once the
        request took effect (a bind that succeeds on the server but whose answer comes too
        late)."""
        with self._lock:
            self._delays.extend([(seconds, after)] * times)

    def break_leases(self, status: int | None = 503) -> None:
        """Answer every Lease request with a `Status` of code `status` (as `fail_next`
        does) from now on; `None` mends them."""
        with self._lock:
            self._lease_fault = status

    def go_away(self) -> None:
        """The API server goes away: every open connection (keep-alive ones and watch
        streams) is cut and new ones are refused (nothing listens on the port) until
        `come_back`. State is kept, as etcd keeps it across an API server restart."""
        with self._changed:
            self._cut_watches()
        if self._server is not None:
            self._port = self._server.port
            self._server.close()
            self._server = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)

    def _connected(self, connection: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def come_back(self) -> None:
        """Serve again on the port it had (clients' kubeconfigs stay right)."""
        if self._server is None:
            handler = type("Handler", (_Handler,), {"api": self})
            self._server = LoopbackServer(handler, name="fake-kube-api", port=self._port)

    def break_watches(self) -> None:
        """Cut every open watch stream: its socket is shut down without the terminating
        chunk, so the client sees a broken connection, not the end of the stream."""
        with self._changed:
            self._cut_watches()

    def expire_history(self, *, including_now: bool = False) -> None:
        """Forget every change kept so far: a watch from an older resourceVersion gets the
        410 Expired ERROR event (open streams go on). `including_now`: a watch from the
        current version too (a restarted server whose history was compacted), so a client
        that was up to date still has to list again."""
        with self._lock:
            if including_now:  # the version moves on: a fresh list starts from there
                self._next_version()
            for resource, kept in self._history.items():
                kept.clear()
                self._horizon[resource] = self._resource_version

    def open_watches(self, resource: str) -> int:
        """How many watch streams of "pods" or "nodes" are open now."""
        with self._lock:
            return sum(1 for w in self._watches if w.resource == resource)

    # --- change history and watch streams (the caller holds the lock) ---

    def _record(self, resource: str, kind: str, obj: JSON) -> None:
        """Keep a change in the history and hand it to the open streams of `resource`."""
        if resource == "nodes":  # stored (and listed) without kind, watched with it
            obj = {"kind": "Node", "apiVersion": "v1", **obj}
        rv = int(obj["metadata"]["resourceVersion"])
        line = _event_line(kind, copy.deepcopy(obj))
        kept = self._history[resource]
        if len(kept) == kept.maxlen:
            self._horizon[resource] = kept[0][0]  # the change about to be dropped
        kept.append((rv, line))
        for watch in self._watches:
            if watch.resource == resource:
                watch.pending.append(line)
        self._changed.notify_all()

    def _cut_watches(self) -> None:
        for watch in self._watches:
            watch.broken = True
            _shut(watch.connection)
        self._changed.notify_all()

    def _open_watch(self, resource: str, query: dict[str, list[str]]) -> _Answer:
        raw_rv = query.get("resourceVersion", [""])[0]
        try:
            since = int(raw_rv or 0)
            timeout = float(query.get("timeoutSeconds", [""])[0] or 0)
        except ValueError:
            return 400, status_body(400, f"invalid watch parameters {query}", "BadRequest"), {}
        watch = _Watch(
            resource=resource,
            # 0 or none: the server's default, as upstream
            deadline=time.monotonic() + min(timeout or DEFAULT_WATCH_TIMEOUT, MAX_WATCH_TIMEOUT),
            bookmarks=query.get("allowWatchBookmarks", [""])[0] in ("true", "1"),
            pending=[],
        )
        with self._lock:
            horizon = self._horizon[resource]
            if since and since < horizon:  # upstream: resourceVersion < oldest - 1
                message = f"too old resource version: {since} ({horizon})"
                watch.pending.append(_event_line("ERROR", status_body(410, message, "Expired")))
                watch.final = True
                return watch
            if since:
                watch.pending.extend(line for rv, line in self._history[resource] if rv > since)
            self._watches.append(watch)  # in the same hold: no change falls in between
        return watch

    def _attach(self, watch: _Watch, connection: socket.socket) -> None:
        with self._lock:
            watch.connection = connection
            if watch.broken:
                _shut(connection)

    def _detach(self, watch: _Watch) -> None:
        with self._changed:
            if watch in self._watches:
                self._watches.remove(watch)
            self._changed.notify_all()

    def _pump(self, watch: _Watch, write: Callable[[bytes], None]) -> bool:
        """Write the stream's events as they come; True once it ended cleanly (timeout,
        stop(), the ERROR event), False when cut (break_watches)."""
        interval = self.bookmark_interval
        next_bookmark = time.monotonic() + interval if watch.bookmarks else float("inf")
        while True:
            with self._changed:
                while True:
                    now = time.monotonic()
                    if watch.broken:
                        return False
                    if (
                        watch.pending
                        or watch.final
                        or self._closed
                        or now >= watch.deadline
                        or now >= next_bookmark
                    ):
                        break
                    self._changed.wait(min(watch.deadline, next_bookmark) - now)
                lines, watch.pending = watch.pending, []
                finished = watch.final or self._closed or now >= watch.deadline
                if now >= next_bookmark and not finished:
                    # after the changes drained with it, so it never runs ahead of them
                    body = _BOOKMARK_BODY[watch.resource]
                    bookmark = {
                        "kind": body["kind"],
                        "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(self._resource_version)},
                        "spec": copy.deepcopy(body["spec"]),
                        "status": copy.deepcopy(body["status"]),
                    }
                    lines.append(_event_line("BOOKMARK", bookmark))
                    next_bookmark = now + interval
            for line in lines:
                write(line)
            if finished:
                return True

    # --- request handling (called from the handler threads) ---

    def _next_version(self) -> str:
        self._resource_version += 1
        return str(self._resource_version)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being handled (delayed ones included); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def release_delays(self) -> None:
        """Let every stalled request proceed now (stop() does it too)."""
        self._stopping.set()

    def _handle(self, request: KubeRequest) -> _Answer:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            delay = self._delays.pop(0) if self._delays and not _is_watch(request) else None
        try:
            if delay is not None and not delay[1]:
                self._stopping.wait(delay[0])
            answer = self._answer(request)
            if delay is not None and delay[1]:
                self._stopping.wait(delay[0])
            return answer
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _answer(self, request: KubeRequest) -> _Answer:
        with self._lock:
            if request.method == "POST" and (m := _EVICTION.match(request.path)):
                # every eviction request, injected faults included
                entry = (m.group(1), m.group(2), _precondition_uid(request.body))
                self.evictions.append(entry)
                options = (
                    request.body.get("deleteOptions") if isinstance(request.body, dict) else None
                )
                if isinstance(options, dict) and options.get("dryRun"):
                    self.dry_run_evictions.append(entry)
            queue = self._watch_failures if _is_watch(request) else self._failures
            failure = queue.pop(0) if queue else None
        if failure is not None:
            return self._injected(failure, request)
        lease = _LEASES.match(request.path)
        with self._lock:
            lease_fault = self._lease_fault
        if lease is not None and lease_fault is not None:
            return self._injected(lease_fault, request)
        if self.token is not None and not self._authenticated(request):
            return 401, _unauthorized(), {}
        if request.method == "POST" and (m := _EVICTION.match(request.path)):
            return self._evict(m.group(1), m.group(2), request.body)
        if lease is not None:
            return self._lease_request(request, lease.group(1), lease.group(2))
        if (
            request.method == "GET"
            and (m := _NAMESPACED_PODS.match(request.path))
            and not _watching(request.query)
        ):
            return self._list_pods(request.query, m.group(1))
        if request.method == "POST" and (m := _BINDING.match(request.path)):
            return self._bind(m.group(1), m.group(2), request.body)
        if request.method == "GET" and (m := _POD.match(request.path)):
            return self._get_pod(m.group(1), m.group(2))
        if request.method == "PATCH" and (m := _POD.match(request.path)):
            return self._patch_pod(m.group(1), m.group(2), request)
        if request.method == "GET" and request.path in _COLLECTIONS:
            if _watching(request.query):
                return self._open_watch(_COLLECTIONS[request.path], request.query)
            if request.path == _NODES:
                return self._list_nodes(request.query)
            return self._list_pods(request.query)
        if request.method == "GET" and (m := _NODE.match(request.path)):
            return self._get_node(m.group(1))
        if request.method == "PATCH" and (m := _NODE.match(request.path)):
            return self._patch_node(m.group(1), request)
        if request.method == "GET" and request.path == _PDBS:
            return self._list_pdbs(request.query)
        if request.method == "GET" and (m := _NAMESPACED_PDBS.match(request.path)):
            return self._list_pdbs(request.query, m.group(1))
        if request.method == "POST" and (m := _EVENTS.match(request.path)):
            return self._create_event(m.group(1), request)
        if request.method == "POST" and request.path == _ACCESS_REVIEWS:
            return self._access_review(request)
        if (
            _BINDING.match(request.path)
            or _EVICTION.match(request.path)
            or _POD.match(request.path)
            or _NODE.match(request.path)
            or request.path == _PDBS
            or _NAMESPACED_PDBS.match(request.path)
            or request.path in _COLLECTIONS
        ):
            return 405, _method_not_allowed(), {}
        return (
            404,
            status_body(404, "the server could not find the requested resource", "NotFound", {}),
            {},
        )

    def _authenticated(self, request: KubeRequest) -> bool:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and credential.strip() == self.token

    def _bind(self, namespace: str, name: str, body: Any) -> tuple[int, JSON, dict[str, str]]:
        # The order of checks follows upstream BindingREST.Create and assignPod.
        refused = _subresource_body_problem(body, namespace, name, "Binding")
        if refused is not None:
            return 400, refused, {}
        metadata = body.get("metadata") or {}
        target = body.get("target") or {}
        if not target.get("name"):
            return 500, status_body(500, "target.name: Required value"), {}
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            actual_uid = pod["metadata"]["uid"]
            wanted_uid = metadata.get("uid")
            if wanted_uid and wanted_uid != actual_uid:
                return 409, _uid_conflict(namespace, name, wanted_uid, actual_uid), {}
            bound_to = pod["spec"].get("nodeName")
            if bound_to:
                return (
                    409,
                    status_body(
                        409,
                        f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                        f'already assigned to node "{bound_to}"',
                        "Conflict",
                        {"name": name, "kind": "pods/binding"},
                    ),
                    {},
                )
            self._assign_locked(pod, target["name"])
            self._binds[(namespace, name)] = self._binds.get((namespace, name), 0) + 1
        return 201, {**_SUCCESS, "code": 201}, {}

    def _assign_locked(self, pod: JSON, node: str) -> None:
        """A bind: spec.nodeName and the PodScheduled condition of the fixture's bound
        MODIFIED event (status keeps the order phase, conditions, qosClass)."""
        pod["spec"]["nodeName"] = node
        pod["metadata"]["resourceVersion"] = self._next_version()
        condition = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": _now(),
        }
        status = pod["status"]
        rest = {k: v for k, v in status.items() if k not in ("phase", "conditions")}
        pod["status"] = {"phase": status.get("phase", "Pending"), "conditions": [condition], **rest}
        self._record("pods", "MODIFIED", pod)

    @staticmethod
    def _mark_deleted(pod: JSON, grace: int) -> None:
        """deletionTimestamp and deletionGracePeriodSeconds right after creationTimestamp,
        generation + 1, as in the fixture's deletion events."""
        meta = pod["metadata"]
        marked: JSON = {}
        for key, value in meta.items():
            marked[key] = value + 1 if key == "generation" else value
            if key == "creationTimestamp":
                marked["deletionTimestamp"] = _now()
                marked["deletionGracePeriodSeconds"] = grace
        marked.setdefault("deletionTimestamp", _now())
        marked.setdefault("deletionGracePeriodSeconds", grace)
        pod["metadata"] = marked

    def _patch_pod(self, namespace: str, name: str, request: KubeRequest) -> _Answer:
        """Merge / strategic merge patch of a pod's labels and annotations (a null value
        deletes a key); a metadata.uid other than the pod's is refused with 422."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in _PATCH_TYPES:
            return 415, status_body(415, _UNSUPPORTED_PATCH, "UnsupportedMediaType"), {}
        body = request.body
        meta_patch = body.get("metadata") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(meta_patch, dict | None):
            return (
                400,
                status_body(400, "the body of the request was in an unknown format", "BadRequest"),
                {},
            )
        meta_patch = meta_patch or {}
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            wanted_uid = meta_patch.get("uid")
            if wanted_uid is not None and wanted_uid != pod["metadata"]["uid"]:
                text = f'Invalid value: "{wanted_uid}": field is immutable'
                cause = {"reason": "FieldValueInvalid", "message": text, "field": "metadata.uid"}
                return (
                    422,
                    status_body(
                        422,
                        f'Pod "{name}" is invalid: metadata.uid: {text}',
                        "Invalid",
                        # the real server lists the same cause twice (patch-uid-mismatch)
                        {"name": name, "kind": "Pod", "causes": [cause, dict(cause)]},
                    ),
                    {},
                )
            allowed = {"kind": "Pod", "apiVersion": "v1"}  # may come along, if they match
            unsupported = [
                k for k, v in body.items() if k != "metadata" and allowed.get(k) != v
            ] + [
                f"metadata.{k}"
                for k, v in meta_patch.items()
                if k not in ("uid", "labels", "annotations")
                and not (k in ("name", "namespace") and v == pod["metadata"][k])
            ]
            if unsupported:  # loud, not ignored: extend the fake when a test needs more
                return (
                    500,
                    status_body(500, f"fake kube-apiserver: patch of {unsupported} not supported"),
                    {},
                )
            meta = copy.deepcopy(pod["metadata"])
            for key in ("labels", "annotations"):
                if key not in meta_patch:
                    continue
                change = meta_patch[key]
                if change is not None and not (
                    isinstance(change, dict)
                    and all(isinstance(v, str | None) for v in change.values())
                ):
                    return (
                        400,
                        status_body(400, f"metadata.{key}: values must be strings", "BadRequest"),
                        {},
                    )
                merged = {
                    k: v
                    for k, v in {**meta.get(key, {}), **(change or {})}.items()
                    if v is not None and change is not None
                }
                meta.pop(key, None)
                if merged:
                    meta[key] = merged
            if meta != pod["metadata"]:  # a no-op patch writes nothing: no new version
                pod["metadata"] = _metadata_in_order(meta)
                pod["metadata"]["resourceVersion"] = self._next_version()
                self._record("pods", "MODIFIED", pod)
            return 200, copy.deepcopy(pod), {}

    def _create_event(
        self, namespace: str, request: KubeRequest
    ) -> tuple[int, JSON, dict[str, str]]:
        """events.k8s.io/v1 create, validated as upstream's ValidateEventCreate (fixtures
        event-create, event-bad, event-node-*): without eventTime the regarded object's
        namespace must be the Event's (or, for a cluster-scoped one, the Event's "" or
        default); with it, an Event about a cluster-scoped object (a Node) must be in
        default or kube-system, and reportingController, reportingInstance, action and
        reason are required; generateName must be a DNS subdomain prefix. Stored, and
        answered, in Go's field order with the fields the server adds."""
        body = request.body
        if not isinstance(body, dict):
            return 400, status_body(400, "the body of the request was in an unknown format"), {}
        meta = body.get("metadata") or {}
        regarding = body.get("regarding") or {}
        prefix = str(meta.get("generateName") or "")
        name = str(meta.get("name") or "")
        if not name and prefix:
            name = prefix + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
        involved = str(regarding.get("namespace") or "")
        timed = bool(body.get("eventTime"))
        if not timed:
            mismatch = namespace not in ("", "default") if not involved else namespace != involved
        else:
            mismatch = not involved and namespace not in ("default", "kube-system")
        causes = []
        if mismatch:
            causes.append(
                (
                    "involvedObject.namespace",
                    "FieldValueInvalid",
                    f'Invalid value: "{involved}": does not match event.namespace',
                )
            )
        if timed:
            causes += [
                (key, "FieldValueRequired", "Required value")
                for key in ("reportingController", "reportingInstance", "action", "reason")
                if not body.get(key)
            ]
        if prefix and not _SUBDOMAIN_PREFIX.fullmatch(prefix):
            causes.append(
                (
                    "metadata.generateName",
                    "FieldValueInvalid",
                    f'Invalid value: "{prefix}": {_SUBDOMAIN_MESSAGE}',
                )
            )
        if not name:
            causes.append(
                (
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                )
            )
        if not timed:
            causes.append(("eventTime", "FieldValueRequired", "Required value"))
        if causes:
            return 422, _invalid("Event", name, causes), {}
        manager = request.headers.get("user-agent", "unknown").split("/")[0].split(" ")[0]
        sent = [k for k in _EVENT_FIELDS if body.get(k) not in (None, "", {}, [])]
        fields: JSON = {f"f:{k}": {} for k in sent}
        if prefix:
            fields["f:metadata"] = {"f:generateName": {}}
        stored: JSON = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
        with self._lock:
            metadata = {
                **{k: v for k, v in meta.items() if k not in ("resourceVersion", "uid")},
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
                "creationTimestamp": _now(),
            }
            stored["metadata"] = {
                **_metadata_in_order(metadata),
                "managedFields": [
                    {
                        "manager": manager,
                        "operation": "Update",
                        "apiVersion": "events.k8s.io/v1",
                        "time": _now(),
                        "fieldsType": "FieldsV1",
                        "fieldsV1": dict(sorted(fields.items())),
                    }
                ],
            }
            for key in _EVENT_FIELDS:
                value = body.get(key)
                if key in ("regarding", "related") and isinstance(value, dict):
                    value = {k: value[k] for k in _REFERENCE_FIELDS if value.get(k)}
                if key == "deprecatedSource":
                    stored[key] = value or {}
                elif value not in (None, "", {}, [], 0) or key in _EVENT_NULLABLE:
                    stored[key] = value  # the deprecated times are null when unset
            self.events.append(stored)
            return 201, copy.deepcopy(stored), {}

    def _access_review(self, request: KubeRequest) -> tuple[int, JSON, dict[str, str]]:
        """A SelfSubjectAccessReview, answered as in selfsubjectaccessreview.json: the
        spec echoed, `status.allowed`; every attribute allowed unless `deny` named it."""
        body = request.body
        spec = body.get("spec") if isinstance(body, dict) else None
        attributes = spec.get("resourceAttributes") if isinstance(spec, dict) else None
        if not isinstance(attributes, dict):
            details = {
                "kind": "SelfSubjectAccessReview",
                "causes": [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value: exactly one of nonResourceAttributes or "
                        "resourceAttributes must be specified",
                        "field": "spec.resourceAttributes",
                    }
                ],
            }
            message = (
                'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                "spec.resourceAttributes: Required value: exactly one of "
                "nonResourceAttributes or resourceAttributes must be specified"
            )
            return 422, status_body(422, message, "Invalid", details), {}
        attributes = {k: v for k, v in attributes.items() if v}  # Go's omitempty
        resource = str(attributes.get("resource", ""))
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        key = (str(attributes.get("verb", "")), str(attributes.get("group", "")), resource)
        with self._lock:
            allowed = key not in self._denied
        manager = request.headers.get("user-agent", "unknown").split("/")[0].split(" ")[0]
        fields: JSON = {".": {}, **{f"f:{k}": {} for k in sorted(attributes)}}
        answer: JSON = {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {
                "managedFields": [
                    {
                        "manager": manager,
                        "operation": "Update",
                        "apiVersion": "authorization.k8s.io/v1",
                        "time": _now(),
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:spec": {"f:resourceAttributes": fields}},
                    }
                ]
            },
            "spec": {"resourceAttributes": attributes},
            "status": {"allowed": allowed},
        }
        return 201, answer, {}

    def _get_pod(self, namespace: str, name: str) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            return 200, json.loads(json.dumps(pod)), {}

    def _list_nodes(self, query: dict[str, list[str]]) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            items = [self._nodes[n] for n in sorted(self._nodes)]
            return 200, self._page("NodeList", items, query), {}

    def _list_pdbs(
        self, query: dict[str, list[str]], namespace: str | None = None
    ) -> tuple[int, JSON, dict[str, str]]:
        """Every PodDisruptionBudget (or the namespace's), paged (list-pdbs.json)."""
        with self._lock:
            items = [
                self._pdbs[key]
                for key in sorted(self._pdbs)  # etcd key order
                if namespace is None or key[0] == namespace
            ]
            return 200, self._page("PodDisruptionBudgetList", items, query, "policy/v1"), {}

    def _get_node(self, name: str) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                return 404, _node_not_found(name), {}
            return 200, {"kind": "Node", "apiVersion": "v1", **copy.deepcopy(node)}, {}

    def _patch_node(self, name: str, request: KubeRequest) -> tuple[int, JSON, dict[str, str]]:
        """A node patch (patch-node-*.json): JSON patch (RFC 6902; an operation that does
        not apply, a failed `test` among them, is 422), merge or strategic merge patch (a
        replaced spec.taints; null removes). A metadata.resourceVersion in the patched
        object other than the stored one is a 409 Conflict. Status changes are dropped, as
        the node strategy does; spec.taints, spec.unschedulable, labels and annotations may
        change, anything else is a loud 500. A change takes the next resourceVersion and
        is a MODIFIED event; a patch that changes nothing writes nothing."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in (_JSON_PATCH, *_PATCH_TYPES):
            return 415, status_body(415, _UNSUPPORTED_PATCH, "UnsupportedMediaType"), {}
        body = request.body
        if content_type == _JSON_PATCH:
            if not isinstance(body, list) or not all(isinstance(op, dict) for op in body):
                wrong = (
                    body
                    if not isinstance(body, list)
                    else next(op for op in body if not isinstance(op, dict))
                )
                into = "jsonpatch.Patch" if not isinstance(body, list) else "jsonpatch.Operation"
                message = (
                    f"json: cannot unmarshal {_go_json_type(wrong)} into Go value of type {into}"
                )
                return 400, status_body(400, message, "BadRequest"), {}
        elif not isinstance(body, dict):
            return (
                400,
                status_body(400, "the body of the request was in an unknown format", "BadRequest"),
                {},
            )
        elif content_type != _PATCH_TYPES[0] and (found := _directives(body)):
            return (
                500,
                status_body(500, f"fake kube-apiserver: patch directives {found} not supported"),
                {},
            )
        with self._lock:
            stored = self._nodes.get(name)
            if stored is None:
                return 404, _node_not_found(name), {}
            current = {"kind": "Node", "apiVersion": "v1", **copy.deepcopy(stored)}
            if content_type == _JSON_PATCH:
                try:
                    patched = _json_patch(current, body)
                except _PatchFailed:
                    return 422, status_body(422, _JSON_PATCH_FAILED, "Invalid", {}), {}
            else:
                patched = _merge_patch(current, body)
            try:
                node = self._patched_node(name, current, patched)
            except _Refused as refused:
                return refused.answer
            if node != stored:
                node["metadata"]["resourceVersion"] = self._next_version()
                self._nodes[name] = node
                self._record("nodes", "MODIFIED", node)
            return 200, {"kind": "Node", "apiVersion": "v1", **copy.deepcopy(node)}, {}

    def _patched_node(self, name: str, current: JSON, patched: Any) -> JSON:
        """The node to store after a patch (lock held), as stored (without kind); raises
        `_Refused` with the answer refusing it."""
        metadata = patched.get("metadata") if isinstance(patched, dict) else None
        if not isinstance(metadata, dict) or not isinstance(patched.get("spec", {}), dict):
            raise _Refused(
                400,
                status_body(400, "the body of the request was in an unknown format", "BadRequest"),
            )
        version = metadata.get("resourceVersion")
        if version not in (None, "", current["metadata"]["resourceVersion"]):
            raise _Refused(
                409,
                status_body(
                    409,
                    f'Operation cannot be fulfilled on nodes "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                    "Conflict",
                    {"name": name, "kind": "nodes"},
                ),
            )
        spec = patched.get("spec") or {}
        old_meta, old_spec = current["metadata"], current["spec"]
        unsupported = (
            [
                k
                for k in set(patched) | set(current)
                if k not in ("metadata", "spec", "status") and patched.get(k) != current.get(k)
            ]
            + [
                f"metadata.{k}"
                for k in set(metadata) | set(old_meta)
                if k not in ("labels", "annotations", "resourceVersion")
                and metadata.get(k) != old_meta.get(k)
            ]
            + [
                f"spec.{k}"
                for k in set(spec) | set(old_spec)
                if k not in _NODE_SPEC_PATCHABLE and spec.get(k) != old_spec.get(k)
            ]
        )
        if unsupported:  # loud, not ignored: extend the fake when a test needs more
            raise _Refused(
                500,
                status_body(
                    500, f"fake kube-apiserver: patch of {sorted(unsupported)} not supported"
                ),
            )
        meta = {k: v for k, v in old_meta.items() if k not in ("labels", "annotations")}
        for key in ("labels", "annotations"):
            value = metadata.get(key)
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            ):
                raise _Refused(
                    400, status_body(400, f"metadata.{key}: values must be strings", "BadRequest")
                )
            if value:
                meta[key] = dict(value)
        taints = spec.get("taints") or []
        if not isinstance(taints, list) or not all(isinstance(t, dict) for t in taints):
            raise _Refused(
                400, status_body(400, "spec.taints: must be a list of taints", "BadRequest")
            )
        causes = []
        for i, taint in enumerate(taints):
            effect = taint.get("effect") or ""
            where = f"spec.taints[{i}].effect"
            if not effect:
                causes.append((where, "FieldValueRequired", "Required value"))
            elif effect not in _TAINT_EFFECTS:
                supported = ", ".join(f'"{e}"' for e in _TAINT_EFFECTS)
                text = f'Unsupported value: "{effect}": supported values: {supported}'
                causes.append((where, "FieldValueNotSupported", text))
        if causes:
            raise _Refused(422, _invalid("Node", name, causes))
        new_spec = {k: v for k, v in old_spec.items() if k not in _NODE_SPEC_PATCHABLE}
        if taints:
            new_spec["taints"] = _stored_taints(taints, old_spec.get("taints", []))
        if spec.get("unschedulable"):
            new_spec["unschedulable"] = True
        return {
            "metadata": _metadata_in_order(meta),
            "spec": new_spec,
            "status": copy.deepcopy(current["status"]),  # the node strategy keeps it
        }

    def _list_pods(
        self, query: dict[str, list[str]], namespace: str | None = None
    ) -> tuple[int, JSON, dict[str, str]]:
        """Every pod (or the namespace's) matching `fieldSelector`, paged."""
        try:
            selected = _field_selector(query.get("fieldSelector", [""])[0])
        except ValueError as exc:
            return 400, status_body(400, str(exc), "BadRequest"), {}
        with self._lock:
            items = [
                self._pods[key]
                for key in sorted(self._pods)  # etcd key order
                if (namespace is None or key[0] == namespace) and selected(self._pods[key])
            ]
            return 200, self._page("PodList", items, query), {}

    def _evict(self, namespace: str, name: str, body: Any) -> tuple[int, JSON, dict[str, str]]:
        """policy/v1 Eviction, in the order of upstream EvictionREST.Create: the body
        (decoded, then its namespace and name), the pod, its budgets (skipped by a pod
        Pending, terminal or terminating), the delete's options (dryRun), then the delete
        with the UID precondition (evict-*.json). A dry run (deleteOptions.dryRun) checks
        all of it and changes nothing."""
        try:
            dry_run = _eviction_dry_run(body)
        except _Refused as refused:
            return refused.answer
        wanted_uid = _precondition_uid(body)
        problem = _subresource_body_problem(body, namespace, name, "Eviction")
        if problem is not None:
            return 400, problem, {}
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            phase = pod["status"].get("phase", "Pending")
            terminating = "deletionTimestamp" in pod["metadata"]
            if not terminating and phase not in ("Pending", "Succeeded", "Failed"):
                # upstream: any dryRun value skips the budget's write (dryrun.IsDryRun)
                budget = self._spend_budget_locked(pod, dry_run=bool(dry_run))
                if budget is not None:
                    return budget
            if any(value != "All" for value in dry_run):  # store.Delete's option check
                return 422, _unsupported_dry_run(dry_run), {}
            actual_uid = pod["metadata"]["uid"]
            if wanted_uid and wanted_uid != actual_uid:
                return 409, _uid_conflict(namespace, name, wanted_uid, actual_uid), {}
            if not dry_run and not terminating:
                # a pod on no node, or done, goes at once; else it terminates on its kubelet
                at_once = not pod["spec"].get("nodeName") or phase in ("Succeeded", "Failed")
                self._delete_locked(namespace, name, graceful=not at_once)
        return 201, {**_SUCCESS, "code": 201}, {}

    def _spend_budget_locked(
        self, pod: JSON, *, dry_run: bool
    ) -> tuple[int, JSON, dict[str, str]] | None:
        """Upstream's budget step of an eviction: the refusal, or None once the one budget
        (if any) gave a disruption (checkAndDecrement: disruptionsAllowed - 1, the pod in
        disruptedPods, the DisruptionAllowed condition False at 0; not in a dry run)."""
        keys = self._budgets_of_locked(pod)
        if len(keys) > 1:  # a metav1.Status returned, not an error: no reason, no details
            return 500, status_body(500, _MULTIPLE_BUDGETS), {}
        if not keys:
            return None
        pdb = self._pdbs[keys[0]]
        budget = pdb["metadata"]["name"]
        status = pdb["status"]
        if status.get("observedGeneration", 0) < pdb["metadata"]["generation"]:
            cause = _BUDGET_NOT_PROCESSED.format(budget=budget)
            details: JSON = {
                "causes": [{"reason": "DisruptionBudget", "message": cause}],
                "retryAfterSeconds": 10,
            }
            return (
                429,
                status_body(429, _EVICTION_REFUSED, "TooManyRequests", details),
                {"Retry-After": "10"},
            )
        allowed = int(status["disruptionsAllowed"])
        if allowed < 0:
            return (
                403,
                status_body(
                    403,
                    f'poddisruptionbudget.policy "{budget}" is forbidden: pdb disruptions '
                    "allowed is negative",
                    "Forbidden",
                    {"name": budget, "group": _POLICY, "kind": "poddisruptionbudget"},
                ),
                {},
            )
        if allowed == 0:
            cause = _BUDGET_BLOCKED.format(
                budget=budget, desired=status["desiredHealthy"], current=status["currentHealthy"]
            )
            details = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
            return 429, status_body(429, _EVICTION_REFUSED, "TooManyRequests", details), {}
        if dry_run:
            return None
        spent = {
            **status,
            "disruptionsAllowed": allowed - 1,
            "disruptedPods": {**status.get("disruptedPods", {}), pod["metadata"]["name"]: _now()},
        }
        if allowed - 1 == 0:
            spent["conditions"] = _disruption_allowed_false(status)
        pdb["status"] = _pdb_status(spent)
        pdb["metadata"]["resourceVersion"] = self._next_version()
        return None

    # --- leases (coordination.k8s.io/v1) ---

    def _lease_request(
        self, request: KubeRequest, namespace: str, name: str | None
    ) -> tuple[int, JSON, dict[str, str]]:
        manager = request.headers.get("user-agent", "unknown").split("/")[0].split(" ")[0]
        if name is None and request.method == "POST":
            return self._create_lease(namespace, request.body, manager)
        if name is not None and request.method == "GET":
            with self._lock:
                lease = self._leases.get((namespace, name))
                if lease is None:
                    return 404, _lease_not_found(name), {}
                return 200, copy.deepcopy(lease), {}
        if name is not None and request.method == "PUT":
            return self._replace_lease(namespace, name, request.body, manager)
        if name is None and request.method == "GET":  # not called by the extender
            return 500, status_body(500, "fake kube-apiserver: lease lists not supported"), {}
        return 405, _method_not_allowed(), {}

    def _create_lease(
        self, namespace: str, body: Any, manager: str
    ) -> tuple[int, JSON, dict[str, str]]:
        """A Lease create, answered as lease-create.json / lease-conflict.json."""
        try:
            metadata, spec = _lease_body(namespace, body, None)
        except _Refused as refused:
            return refused.answer
        name = str(metadata.get("name") or "")
        if not name:
            message = (
                'Lease.coordination.k8s.io "" is invalid: metadata.name: Required value: name '
                "or generateName is required"
            )
            cause = {
                "reason": "FieldValueRequired",
                "message": "Required value: name or generateName is required",
                "field": "metadata.name",
            }
            details = {"group": _LEASE_GROUP, "kind": "Lease", "causes": [cause]}
            return 422, status_body(422, message, "Invalid", details), {}
        with self._lock:
            if (namespace, name) in self._leases:
                return (
                    409,
                    status_body(
                        409,
                        f'leases.coordination.k8s.io "{name}" already exists',
                        "AlreadyExists",
                        {"name": name, "group": _LEASE_GROUP, "kind": "leases"},
                    ),
                    {},
                )
            return 201, copy.deepcopy(self._store_lease(namespace, name, spec, manager)), {}

    def _replace_lease(
        self, namespace: str, name: str, body: Any, manager: str
    ) -> tuple[int, JSON, dict[str, str]]:
        """A Lease update (PUT): the stored resourceVersion must be the one sent."""
        try:
            metadata, spec = _lease_body(namespace, body, name)
        except _Refused as refused:
            return refused.answer
        with self._lock:
            lease = self._leases.get((namespace, name))
            if lease is None:
                return 404, _lease_not_found(name), {}
            sent = str(metadata.get("resourceVersion") or "")
            if not sent:
                text = "Invalid value: 0x0: must be specified for an update"
                cause = {
                    "reason": "FieldValueInvalid",
                    "message": text,
                    "field": "metadata.resourceVersion",
                }
                return (
                    422,
                    status_body(
                        422,
                        f'Lease.coordination.k8s.io "{name}" is invalid: '
                        f"metadata.resourceVersion: {text}",
                        "Invalid",
                        {"name": name, "group": _LEASE_GROUP, "kind": "Lease", "causes": [cause]},
                    ),
                    {},
                )
            if sent != lease["metadata"]["resourceVersion"]:
                return (
                    409,
                    status_body(
                        409,
                        f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": '
                        "the object has been modified; please apply your changes to the latest "
                        "version and try again",
                        "Conflict",
                        {"name": name, "group": _LEASE_GROUP, "kind": "leases"},
                    ),
                    {},
                )
            if spec != lease["spec"]:  # a no-op update writes nothing, as upstream
                lease["spec"] = spec
                lease["metadata"]["resourceVersion"] = self._next_version()
                lease["metadata"]["managedFields"] = _lease_fields(spec, manager)
            return 200, copy.deepcopy(lease), {}

    def _store_lease(self, namespace: str, name: str, spec: JSON, manager: str) -> JSON:
        """A new Lease as the server stores it (lock held)."""
        lease: JSON = {
            "kind": "Lease",
            "apiVersion": f"{_LEASE_GROUP}/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
                "creationTimestamp": _now(),
                "managedFields": _lease_fields(spec, manager),
            },
            "spec": spec,
        }
        self._leases[(namespace, name)] = lease
        return lease

    def _page(
        self, kind: str, items: list[JSON], query: dict[str, list[str]], api_version: str = "v1"
    ) -> JSON:
        """One page of a list (lock held): `continue` is the index of the next item; the
        items carry no kind / apiVersion (list-nodes-limit-1.json)."""
        start = int(query.get("continue", ["0"])[0] or 0)
        limit = int(query.get("limit", ["0"])[0] or 0)
        end = start + limit if limit > 0 else len(items)
        page = [
            {k: copy.deepcopy(v) for k, v in item.items() if k not in ("kind", "apiVersion")}
            for item in items[start:end]
        ]
        metadata: JSON = {"resourceVersion": str(self._resource_version)}
        if end < len(items):
            metadata["continue"] = str(end)
            metadata["remainingItemCount"] = len(items) - end
        return {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}

    def _injected(self, code: int, request: KubeRequest) -> _Answer:
        if code == 401:
            return 401, _unauthorized(), {}
        if code == 403:
            return 403, self._forbidden(request), {}
        if code == 429:
            return (
                429,
                status_body(
                    429,
                    "Too many requests, please try again later.",
                    "TooManyRequests",
                    {"retryAfterSeconds": 1},
                ),
                {"Retry-After": "1"},
            )
        if code == 500:
            return (
                500,
                status_body(
                    500,
                    "Internal error occurred: injected fault",
                    "InternalError",
                    {"causes": [{"message": "injected fault"}]},
                ),
                {},
            )
        if code == 503:
            return (
                503,
                status_body(
                    503,
                    "the server is currently unable to handle the request",
                    "ServiceUnavailable",
                    {},
                ),
                {},
            )
        if code == 504:
            return (
                504,
                status_body(
                    504,
                    "Timeout: request did not complete within the allotted timeout",
                    "Timeout",
                    {},
                ),
                {},
            )
        phrase = HTTPStatus(code).phrase
        return code, status_body(code, phrase, phrase.replace(" ", ""), {}), {}

    def _forbidden(self, request: KubeRequest) -> JSON:
        if m := _BINDING.match(request.path):
            namespace, name, verb, resource = m.group(1), m.group(2), "create", "pods/binding"
        elif m := _EVICTION.match(request.path):
            namespace, name, verb, resource = m.group(1), m.group(2), "create", "pods/eviction"
        elif m := _LEASES.match(request.path):
            verb = {"POST": "create", "PUT": "update", "DELETE": "delete"}.get(
                request.method, "get" if m.group(2) else "list"
            )
            what = "leases.coordination.k8s.io" + (f' "{m.group(2)}"' if m.group(2) else "")
            details: JSON = {"name": m.group(2)} if m.group(2) else {}
            return status_body(
                403,
                f'{what} is forbidden: User "{self.user}" cannot {verb} resource "leases" in API '
                f'group "{_LEASE_GROUP}" in the namespace "{m.group(1)}"',
                "Forbidden",
                {**details, "group": _LEASE_GROUP, "kind": "leases"},
            )
        elif m := _NAMESPACED_PODS.match(request.path):
            return status_body(
                403,
                f'pods is forbidden: User "{self.user}" cannot list resource "pods" in API group '
                f'"" in the namespace "{m.group(1)}"',
                "Forbidden",
                {"kind": "pods"},
            )
        elif m := _POD.match(request.path):
            verb = {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(
                request.method, "get"
            )
            namespace, name, resource = m.group(1), m.group(2), "pods"
        elif m := _EVENTS.match(request.path):
            return status_body(
                403,
                f'events.events.k8s.io is forbidden: User "{self.user}" cannot create resource '
                f'"events" in API group "events.k8s.io" in the namespace "{m.group(1)}"',
                "Forbidden",
                {"group": "events.k8s.io", "kind": "events"},
            )
        elif m := _NODE.match(request.path):
            verb = {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(
                request.method, "get"
            )
            return status_body(
                403,
                f'nodes "{m.group(1)}" is forbidden: User "{self.user}" cannot {verb} resource '
                f'"nodes" in API group "" at the cluster scope',
                "Forbidden",
                {"name": m.group(1), "kind": "nodes"},
            )
        elif request.path == _PDBS or _NAMESPACED_PDBS.match(request.path):
            m = _NAMESPACED_PDBS.match(request.path)
            scope = f'in the namespace "{m.group(1)}"' if m else "at the cluster scope"
            return status_body(
                403,
                f'poddisruptionbudgets.policy is forbidden: User "{self.user}" cannot list '
                f'resource "poddisruptionbudgets" in API group "policy" {scope}',
                "Forbidden",
                {"group": _POLICY, "kind": "poddisruptionbudgets"},
            )
        else:
            collection = _COLLECTIONS.get(request.path, "nodes")
            verb = "watch" if _watching(request.query) else "list"
            return status_body(
                403,
                f'{collection} is forbidden: User "{self.user}" cannot {verb} resource '
                f'"{collection}" in API group "" at the cluster scope',
                "Forbidden",
                {"kind": collection},
            )
        return status_body(
            403,
            f'pods "{name}" is forbidden: User "{self.user}" cannot {verb} resource '
            f'"{resource}" in API group "" in the namespace "{namespace}"',
            "Forbidden",
            {"name": name, "kind": "pods"},
        )


def _watching(query: dict[str, list[str]]) -> bool:
    return query.get("watch", [""])[0] in ("true", "1")


def _shut(connection: socket.socket | None) -> None:
    """Shut a stream's socket down at once (FIN, no terminating chunk)."""
    if connection is not None:
        with contextlib.suppress(OSError):  # already gone
            connection.shutdown(socket.SHUT_RDWR)


_METADATA_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
)


def _metadata_in_order(meta: JSON) -> JSON:
    """ObjectMeta's fields in Go's declaration order, as the server serialises them."""
    known = {k: meta[k] for k in _METADATA_ORDER if k in meta}
    return {**known, **{k: v for k, v in meta.items() if k not in known}}


def _is_watch(request: KubeRequest) -> bool:
    return request.method == "GET" and request.path in _COLLECTIONS and _watching(request.query)


def _field_selector(text: str) -> Callable[[JSON], bool]:
    """A pod fieldSelector (`a=b,c!=d`; `==` too) as a predicate; ValueError (a 400) for a
    field upstream does not support or a term that is not a comparison."""
    terms: list[tuple[tuple[str, str], str, bool]] = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        op = next((op for op in ("!=", "==", "=") if op in term), None)
        if op is None:
            raise ValueError(f"invalid selector: '{text}'; can't understand '{term}'")
        key, _, value = term.partition(op)
        equal = op != "!="
        key = key.strip()
        if key not in _POD_FIELDS:
            raise ValueError(f"field label not supported: {key}")
        terms.append((_POD_FIELDS[key], value.strip(), equal))

    def selected(pod: JSON) -> bool:
        for (part, key), value, equal in terms:
            actual = str(pod.get(part, {}).get(key) or "")
            if (actual == value) != equal:
                return False
        return True

    return selected


def _precondition_uid(body: Any) -> str:
    """deleteOptions.preconditions.uid of an Eviction, or ""."""
    options = body.get("deleteOptions") if isinstance(body, dict) else None
    preconditions = options.get("preconditions") if isinstance(options, dict) else None
    return str(preconditions.get("uid") or "") if isinstance(preconditions, dict) else ""


def label_selector_matches(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None
) -> bool:
    """Whether a metav1.LabelSelector selects an object with `labels`, as upstream's
    LabelSelectorAsSelector then Matches: no selector (None) selects nothing, the empty
    one (`{}`) everything; else every matchLabels pair and every matchExpressions
    requirement must hold: In (the label is set to one of `values`), NotIn (absent, or set
    to none of them), Exists, DoesNotExist. ValueError for a selector upstream refuses (an
    unknown operator, In / NotIn without values, Exists / DoesNotExist with values), even
    when an earlier requirement already fails."""
    if selector is None:
        return False
    requirements: list[tuple[str, str, list[str]]] = [
        (str(key), "In", [str(value)]) for key, value in (selector.get("matchLabels") or {}).items()
    ]
    for expression in selector.get("matchExpressions") or []:
        key, operator = str(expression.get("key", "")), expression.get("operator")
        values = [str(v) for v in expression.get("values") or []]
        if operator not in _SELECTOR_OPERATORS:
            raise ValueError(f'"{operator}" is not a valid label selector operator')
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{key}: values set must be empty for exists and does not exist")
        requirements.append((key, str(operator), values))
    have = labels or {}
    for key, operator, values in requirements:
        present = key in have
        if operator == "In" and not (present and have[key] in values):
            return False
        if operator == "NotIn" and present and have[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _pdb_status(status: JSON) -> JSON:
    """A PodDisruptionBudgetStatus as Go serialises it: its field order, and the omitempty
    ones (observedGeneration, disruptedPods, conditions) left out when zero or empty."""
    omitempty = ("observedGeneration", "disruptedPods", "conditions")
    return {
        key: status[key]
        for key in _PDB_STATUS
        if key in status and not (key in omitempty and not status[key])
    }


def _disruption_allowed_false(status: JSON) -> list[JSON]:
    """The conditions once an eviction took the last disruption (upstream's
    UpdateDisruptionAllowedCondition: DisruptionAllowed False, InsufficientPods; its
    lastTransitionTime kept if it was False already)."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    old = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    condition: JSON = {"type": "DisruptionAllowed", "status": "False"}
    if status.get("observedGeneration"):
        condition["observedGeneration"] = status["observedGeneration"]
    condition["lastTransitionTime"] = (
        old["lastTransitionTime"] if old is not None and old.get("status") == "False" else _now()
    )
    condition.update(reason="InsufficientPods", message="")
    return [c for c in conditions if c is not old] + [condition]


_GO_JSON_TYPES = ((bool, "bool"), (int, "number"), (float, "number"), (str, "string"))


def _go_json_type(value: Any) -> str:
    """How Go's JSON decoder names a value's type in an unmarshal error."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return next((name for kind, name in _GO_JSON_TYPES if isinstance(value, kind)), "null")


def _eviction_dry_run(body: Any) -> list[str]:
    """deleteOptions.dryRun of an Eviction ([] when none); raises `_Refused` with the 400
    of a body the server cannot decode (a dryRun that is not a list of strings)."""
    options = body.get("deleteOptions") if isinstance(body, dict) else None
    if not isinstance(options, dict):
        return []
    dry_run = options.get("dryRun")
    if dry_run is None:
        return []
    if isinstance(dry_run, list) and all(isinstance(v, str) for v in dry_run):
        return list(dry_run)
    wrong, where, kind = dry_run, "DeleteOptions.deleteOptions.dryRun", "[]string"
    if isinstance(dry_run, list):
        wrong, kind = next(v for v in dry_run if not isinstance(v, str)), "string"
    message = (
        'Eviction in version "v1" cannot be handled as a Eviction: json: cannot unmarshal '
        f"{_go_json_type(wrong)} into Go struct field {where} of type {kind}"
    )
    raise _Refused(400, status_body(400, message, "BadRequest"))


def _unsupported_dry_run(dry_run: list[str]) -> JSON:
    """The 422 of a dryRun value other than "All": rest.BeforeDelete's ValidateDeleteOptions
    (field.NotSupported prints the []string with Go's %#v)."""
    shown = "[]string{" + ", ".join(json.dumps(v) for v in dry_run) + "}"
    text = f'Unsupported value: {shown}: supported values: "All"'
    cause = {"reason": "FieldValueNotSupported", "message": text, "field": "dryRun"}
    return status_body(
        422,
        f'DeleteOptions.meta.k8s.io "" is invalid: dryRun: {text}',
        "Invalid",
        {"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [cause]},
    )


def _stored_taints(taints: list[JSON], before: list[JSON]) -> list[JSON]:
    """Taints as the server stores them: key, value, effect, timeAdded in Go's order, the
    empty ones left out; a NoExecute taint new here gets timeAdded (the fixture's note)."""
    known = {(t.get("key"), t.get("effect")): t.get("timeAdded") for t in before}
    stored = []
    for taint in taints:
        added = taint.get("timeAdded") or known.get((taint.get("key"), taint.get("effect")))
        if added is None and taint.get("effect") == "NoExecute":
            added = _now()
        entry: JSON = {"key": taint.get("key", "")}
        if taint.get("value"):
            entry["value"] = taint["value"]
        entry["effect"] = taint.get("effect", "")
        if added:
            entry["timeAdded"] = added
        stored.append(entry)
    return stored


class _PatchFailed(Exception):
    """A JSON patch operation that does not apply (answered 422)."""


def _pointer(path: Any) -> list[str]:
    """An RFC 6901 JSON pointer's reference tokens."""
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise _PatchFailed(f"bad JSON pointer {path!r}")
    if not path:
        return []
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(container: list[Any], token: str, *, end: bool) -> int:
    """A list index token: digits within the list (`end`: its length and "-" too)."""
    if end and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _PatchFailed(f"bad array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not end):
        raise _PatchFailed(f"array index {index} out of range")
    return index


def _resolve(doc: Any, tokens: list[str]) -> Any:
    """The value a pointer names; _PatchFailed if it does not exist."""
    for token in tokens:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, end=False)]
        else:
            raise _PatchFailed(f"missing path at {token!r}")
    return doc


def _json_patch(doc: Any, operations: list[JSON]) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test) applied to a copy of `doc`."""
    doc = copy.deepcopy(doc)

    def put(tokens: list[str], value: Any, *, replace: bool) -> None:
        nonlocal doc
        if not tokens:
            doc = value
            return
        parent, last = _resolve(doc, tokens[:-1]), tokens[-1]
        if isinstance(parent, dict):
            if replace and last not in parent:
                raise _PatchFailed(f"replace of a missing key {last!r}")
            parent[last] = value
        elif isinstance(parent, list):
            if replace:
                parent[_index(parent, last, end=False)] = value
            else:
                parent.insert(_index(parent, last, end=True), value)
        else:
            raise _PatchFailed("the parent is not an object or array")

    def take(tokens: list[str]) -> Any:
        if not tokens:
            raise _PatchFailed("cannot remove the whole document")
        parent, last = _resolve(doc, tokens[:-1]), tokens[-1]
        if isinstance(parent, dict) and last in parent:
            return parent.pop(last)
        if isinstance(parent, list):
            return parent.pop(_index(parent, last, end=False))
        raise _PatchFailed(f"remove of a missing path {last!r}")

    for operation in operations:
        op, tokens = operation.get("op"), _pointer(operation.get("path"))
        if op in ("add", "replace", "test") and "value" not in operation:
            raise _PatchFailed(f"{op} without a value")
        if op == "add":
            put(tokens, copy.deepcopy(operation["value"]), replace=False)
        elif op == "replace":
            put(tokens, copy.deepcopy(operation["value"]), replace=True)
        elif op == "remove":
            take(tokens)
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from"))
            value = take(source) if op == "move" else copy.deepcopy(_resolve(doc, source))
            put(tokens, value, replace=False)
        elif op == "test":
            try:
                actual = _resolve(doc, tokens)
            except _PatchFailed:
                if operation["value"] is None:  # evanphx/json-patch: missing equals null
                    continue
                raise
            if json.dumps(actual, sort_keys=True) != json.dumps(operation["value"], sort_keys=True):
                raise _PatchFailed(f"testing value {operation.get('path')} failed")
        else:
            raise _PatchFailed(f"unexpected kind {op!r}")
    return doc


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def _directives(patch: Any) -> list[str]:
    """The strategic-merge-patch directives ($patch, $retainKeys, $setElementOrder/...) in
    a patch: not modelled here."""
    if isinstance(patch, dict):
        found = [k for k in patch if k.startswith("$")]
        return found + [d for v in patch.values() for d in _directives(v)]
    if isinstance(patch, list):
        return [d for v in patch for d in _directives(v)]
    return []


def _invalid(kind: str, name: str, causes: Sequence[tuple[str, str, str]]) -> JSON:
    """A 422 Invalid as errors.NewInvalid builds it from (field, reason, message) causes:
    one cause is named bare, several in brackets (utilerrors' aggregate)."""
    errors = [f"{where}: {text}" for where, _, text in causes]
    shown = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    details: JSON = {"name": name} if name else {}
    details["kind"] = kind
    details["causes"] = [
        {"reason": reason, "message": text, "field": where} for where, reason, text in causes
    ]
    return status_body(422, f'{kind} "{name}" is invalid: {shown}', "Invalid", details)


def _node_not_found(name: str) -> JSON:
    return status_body(
        404, f'nodes "{name}" not found', "NotFound", {"name": name, "kind": "nodes"}
    )


def _micro_now() -> str:
    """A MicroTime now, as the API server writes it: 2026-11-23T13:26:23.000000Z."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _micro(value: Any) -> str:
    """An RFC 3339 time as the server stores a MicroTime (UTC, microseconds, Z)."""
    try:
        stamp = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise ValueError(
            f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": cannot parse "{value}"'
        )
    return stamp.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lease_spec(spec: JSON) -> JSON:
    """A LeaseSpec as stored: Go's field order, nulls dropped, times as MicroTime."""
    stored = {key: spec[key] for key in _LEASE_SPEC if spec.get(key) is not None}
    for key in _LEASE_TIMES:
        if key in stored:
            stored[key] = _micro(stored[key])
    return stored


class _Refused(Exception):
    """A request the server refuses with `answer`."""

    def __init__(self, code: int, body: JSON) -> None:
        super().__init__(body.get("message"))
        self.answer: tuple[int, JSON, dict[str, str]] = (code, body, {})


def _lease_body(namespace: str, body: Any, name: str | None) -> tuple[JSON, JSON]:
    """(metadata, stored spec) of a Lease sent to create (`name` None) or replace; raises
    `_Refused` with the answer refusing it."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    spec = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(metadata, dict) or not isinstance(spec, dict | None):
        raise _Refused(
            400, status_body(400, "the body of the request was in an unknown format", "BadRequest")
        )
    if metadata.get("namespace") not in (None, "", namespace):
        raise _Refused(
            400,
            status_body(
                400,
                "the namespace of the provided object does not match the namespace sent on the "
                "request",
                "BadRequest",
            ),
        )
    if name is not None and metadata.get("name") != name:
        raise _Refused(
            400,
            status_body(
                400,
                f"the name of the object ({metadata.get('name')}) does not match the name on "
                f"the URL ({name})",
                "BadRequest",
            ),
        )
    try:
        return metadata, _lease_spec(spec or {})
    except ValueError as exc:
        raise _Refused(400, status_body(400, str(exc), "BadRequest")) from exc


def _lease_fields(spec: JSON, manager: str) -> list[JSON]:
    """managedFields of a Lease written by `manager` (lease-create.json)."""
    return [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": f"{_LEASE_GROUP}/v1",
            "time": _now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {f"f:{key}": {} for key in sorted(spec)}},
        }
    ]


def _lease_not_found(name: str) -> JSON:
    return status_body(
        404,
        f'leases.coordination.k8s.io "{name}" not found',
        "NotFound",
        {"name": name, "group": _LEASE_GROUP, "kind": "leases"},
    )


def _uid_conflict(namespace: str, name: str, wanted: str, actual: str) -> JSON:
    """409 of a UID precondition that failed (bind-uid-mismatch.json)."""
    return status_body(
        409,
        f'Operation cannot be fulfilled on pods "{name}": StorageError: invalid object, Code: 4, '
        f"Key: /registry/pods/{namespace}/{name}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}",
        "Conflict",
        {"name": name, "kind": "pods"},
    )


def _unauthorized() -> JSON:
    return status_body(401, "Unauthorized", "Unauthorized")


def _not_found(name: str) -> JSON:
    return status_body(404, f'pods "{name}" not found', "NotFound", {"name": name, "kind": "pods"})


class _Handler(BaseHTTPRequestHandler):
    api: FakeKubeAPI
    protocol_version = "HTTP/1.1"
    timeout = 10
    # Headers and body go out in separate writes: without this each answer waits for
    # the client's delayed ACK (~40 ms), which the real (Go) API server never does.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.api._connected(self.connection, True)

    def finish(self) -> None:
        self.api._connected(self.connection, False)
        super().finish()

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        parts = urlsplit(self.path)
        request = KubeRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            body=body,
            headers={k.lower(): v for k, v in self.headers.items()},
        )
        answer = self.api._handle(request)
        if isinstance(answer, _Watch):
            self._stream(answer)
            return
        code, body, headers = answer
        payload = json.dumps(body, separators=(",", ":")).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stream(self, watch: _Watch) -> None:
        """A watch answer: 200, chunked, one chunk per event line, then the terminating
        zero-length chunk, unless the stream is cut (break_watches) or the client left."""
        clean = False
        try:
            self.api._attach(watch, self.connection)
            self.send_response(200)
            self.send_header("Content-Type", WATCH_CONTENT_TYPE)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            clean = self.api._pump(watch, self._chunk)
            if clean:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:  # BrokenPipe, ConnectionReset, a socket shut down under us
            clean = False
        finally:
            self.api._detach(watch)
            if not clean:
                self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _method_not_allowed() -> JSON:
    return status_body(
        405,
        "the server does not allow this method on the requested resource",
        "MethodNotAllowed",
        {},
    )


def _subresource_body_problem(body: Any, namespace: str, name: str, kind: str) -> JSON | None:
    """The 400 Status the API answers a pod subresource's body (Binding, Eviction) that is
    not an object or names another pod (bind-bad-body.json, evict-bad-body.json); None
    when it is fine."""
    if not isinstance(body, dict):
        return status_body(400, "the body of the request was in an unknown format", "BadRequest")
    metadata = body.get("metadata") or {}
    if metadata.get("namespace") not in (None, "", namespace):
        return status_body(
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
            "BadRequest",
        )
    if metadata.get("name") != name:
        return status_body(400, f"name in URL does not match name in {kind} object", "BadRequest")
    return None


def client_for(server: FakeKubeAPI, token: str | None = None) -> kubernetes.client.ApiClient:
    """An ApiClient for `server`: its own Configuration, never the global default.

    `token` defaults to the server's token; pass "" to send no Authorization header, or
    another string to send a wrong one.
    """
    configuration = kubernetes.client.Configuration(host=server.url)
    configuration.retries = False  # as extender.cluster.client.auth.load_api_client sets it
    bearer = server.token if token is None else token
    if bearer:
        configuration.api_key = {"BearerToken": bearer}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return kubernetes.client.ApiClient(configuration)


def write_kubeconfig(path: Path, server: str, token: str) -> Path:
    """A kubeconfig for a plain-HTTP API server with a bearer token."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "extender", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "extender"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(doc, indent=2))
    return path
