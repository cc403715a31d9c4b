"""A loopback fake kube-apiserver: the one every test that talks to Kubernetes uses.

It answers the few paths the extender calls with the paths, status codes and bodies
of a real kube-apiserver (see tests/fixtures/kube-apiserver/):

    POST /api/v1/namespaces/{ns}/pods/{name}/binding
    GET  /api/v1/namespaces/{ns}/pods/{name}
    GET  /api/v1/nodes            (honours limit / continue)

Like the real server it accepts a bind to a node that does not exist, and it answers a
second bind of a pod with 409 whatever the target. Faults are injected with
`fail_next` and `delay_next`; a `token` turns on bearer authentication.

    with FakeKubeAPI() as api:
        api.add_pod("decice", "p1", "uid-1")
        client = client_for(api)
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client

from tests.loopback import LoopbackServer

JSON = dict[str, Any]

DEFAULT_USER = "system:serviceaccount:decice:nobody"
_CREATED = "2026-11-23T02:41:05Z"

_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events$")
_SUBDOMAIN_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9-])?")
_NODES = "/api/v1/nodes"


@dataclass(frozen=True)
class KubeRequest:
    """One request as the fake server received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str] = field(repr=False)


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


class FakeKubeAPI:
    """Threaded HTTP server on 127.0.0.1 with a random port; `url` once started."""

    def __init__(self, *, token: str | None = None, user: str = DEFAULT_USER) -> None:
        self.token = token
        self.user = user
        self.requests: list[KubeRequest] = []
        self.events: list[JSON] = []  # created Events, as stored
        self._pods: dict[tuple[str, str], JSON] = {}
        self._nodes: dict[str, JSON] = {}
        self._binds: dict[tuple[str, str], int] = {}
        self._failures: list[int] = []
        self._delays: list[tuple[float, bool]] = []
        self._resource_version = 100
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._stopping = threading.Event()
        self._server: LoopbackServer | None = None

    # --- lifecycle ---

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeKubeAPI is not started")
        return self._server.url

    def start(self) -> FakeKubeAPI:
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = LoopbackServer(handler, name="fake-kube-api")
        return self

    def stop(self) -> None:
        self._stopping.set()
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
    ) -> JSON:
        """Add a pending pod; `cpu_request` may list one request per container."""
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
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        if node_name is not None:
            spec["nodeName"] = node_name
        with self._lock:
            pod: JSON = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": uid,
                    "resourceVersion": self._next_version(),
                    "generation": 1,
                    "creationTimestamp": _CREATED,
                },
                "spec": spec,
                "status": {
                    "phase": "Pending",
                    "qosClass": "Burstable" if any(requests) else "BestEffort",
                },
            }
            self._pods[(namespace, name)] = pod
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
            self._nodes[name] = node
        return node

    def pod(self, namespace: str, name: str) -> JSON | None:
        with self._lock:
            return self._pods.get((namespace, name))

    def bind_count(self, namespace: str, name: str) -> int:
        """How many binds of this pod the server accepted."""
        with self._lock:
            return self._binds.get((namespace, name), 0)

    def requests_to(self, method: str, path: str) -> list[KubeRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    # --- faults ---

    def fail_next(self, status: int, times: int = 1) -> None:
        """Answer the next `times` requests with a `Status` of code `status`."""
        with self._lock:
            self._failures.extend([status] * times)

    def delay_next(self, seconds: float, times: int = 1, *, after: bool = False) -> None:
        """Stall the next `times` requests; `after=True` stalls once the request took effect
        (a bind that succeeds on the server but whose answer comes too late)."""
        with self._lock:
            self._delays.extend([(seconds, after)] * times)

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

    def _handle(self, request: KubeRequest) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            delay = self._delays.pop(0) if self._delays else None
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

    def _answer(self, request: KubeRequest) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return self._injected(failure, request)
        if self.token is not None and not self._authenticated(request):
            return 401, _unauthorized(), {}
        if request.method == "POST" and (m := _BINDING.match(request.path)):
            return self._bind(m.group(1), m.group(2), request.body)
        if request.method == "GET" and (m := _POD.match(request.path)):
            return self._get_pod(m.group(1), m.group(2))
        if request.method == "GET" and request.path == _NODES:
            return self._list_nodes(request.query)
        if request.method == "POST" and (m := _EVENTS.match(request.path)):
            return self._create_event(m.group(1), request.body)
        if _BINDING.match(request.path) or _POD.match(request.path) or request.path == _NODES:
            return (
                405,
                status_body(
                    405,
                    "the server does not allow this method on the requested resource",
                    "MethodNotAllowed",
                    {},
                ),
                {},
            )
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
        if not isinstance(body, dict):
            return (
                400,
                status_body(400, "the body of the request was in an unknown format", "BadRequest"),
                {},
            )
        metadata = body.get("metadata") or {}
        target = body.get("target") or {}
        if metadata.get("namespace") not in (None, "", namespace):
            return (
                400,
                status_body(
                    400,
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                    "BadRequest",
                ),
                {},
            )
        if metadata.get("name") != name:
            return (
                400,
                status_body(400, "name in URL does not match name in Binding object", "BadRequest"),
                {},
            )
        if not target.get("name"):
            return 500, status_body(500, "target.name: Required value"), {}
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            actual_uid = pod["metadata"]["uid"]
            wanted_uid = metadata.get("uid")
            if wanted_uid and wanted_uid != actual_uid:
                return (
                    409,
                    status_body(
                        409,
                        f'Operation cannot be fulfilled on pods "{name}": StorageError: invalid '
                        f"object, Code: 4, Key: /registry/pods/{namespace}/{name}, "
                        f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
                        f"precondition: {wanted_uid}, UID in object meta: {actual_uid}",
                        "Conflict",
                        {"name": name, "kind": "pods"},
                    ),
                    {},
                )
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
            pod["spec"]["nodeName"] = target["name"]
            pod["metadata"]["resourceVersion"] = self._next_version()
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": _CREATED,
                }
            ]
            self._binds[(namespace, name)] = self._binds.get((namespace, name), 0) + 1
        return 201, {**_SUCCESS, "code": 201}, {}

    def _create_event(self, namespace: str, body: Any) -> tuple[int, JSON, dict[str, str]]:
        """events.k8s.io/v1 create, validated as in fixtures event-create / event-bad."""
        if not isinstance(body, dict):
            return 400, status_body(400, "the body of the request was in an unknown format"), {}
        meta = body.get("metadata") or {}
        regarding = body.get("regarding") or {}
        prefix = str(meta.get("generateName") or "")
        causes = []
        if regarding.get("namespace", "") != namespace:
            causes.append(
                (
                    "involvedObject.namespace",
                    "FieldValueInvalid",
                    f'Invalid value: "{regarding.get("namespace", "")}": does not match '
                    "event.namespace",
                )
            )
        if prefix and not _SUBDOMAIN_PREFIX.fullmatch(prefix):
            causes.append(
                (
                    "metadata.generateName",
                    "FieldValueInvalid",
                    f'Invalid value: "{prefix}": a lowercase RFC 1123 subdomain must consist '
                    "of lower case alphanumeric characters, '-' or '.'",
                )
            )
        if not body.get("eventTime"):
            causes.append(("eventTime", "FieldValueRequired", "Required value"))
        name = (prefix or str(meta.get("name") or "")) + uuid.uuid4().hex[:5]
        if causes:
            message = (
                f'Event "{name}" is invalid: ['
                + ", ".join(f"{field}: {text}" for field, _, text in causes)
                + "]"
            )
            details = {
                "name": name,
                "kind": "Event",
                "causes": [
                    {"reason": reason, "message": text, "field": field}
                    for field, reason, text in causes
                ],
            }
            return 422, status_body(422, message, "Invalid", details), {}
        with self._lock:
            stored = {
                **body,
                "kind": "Event",
                "apiVersion": "events.k8s.io/v1",
                "metadata": {
                    **meta,
                    "name": name,
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": self._next_version(),
                },
            }
            self.events.append(stored)
        return 201, stored, {}

    def _get_pod(self, namespace: str, name: str) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            pod = self._pods.get((namespace, name))
            if pod is None:
                return 404, _not_found(name), {}
            return 200, json.loads(json.dumps(pod)), {}

    def _list_nodes(self, query: dict[str, list[str]]) -> tuple[int, JSON, dict[str, str]]:
        with self._lock:
            names = sorted(self._nodes)
            start = int(query.get("continue", ["0"])[0] or 0)
            limit = int(query.get("limit", ["0"])[0] or 0)
            end = start + limit if limit > 0 else len(names)
            items = [json.loads(json.dumps(self._nodes[n])) for n in names[start:end]]
            metadata: JSON = {"resourceVersion": str(self._resource_version)}
            if end < len(names):
                metadata["continue"] = str(end)
                metadata["remainingItemCount"] = len(names) - end
        return (
            200,
            {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": items},
            {},
        )

    def _injected(self, code: int, request: KubeRequest) -> tuple[int, JSON, dict[str, str]]:
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
        elif m := _POD.match(request.path):
            namespace, name, verb, resource = m.group(1), m.group(2), "get", "pods"
        elif m := _EVENTS.match(request.path):
            return status_body(
                403,
                f'events.events.k8s.io is forbidden: User "{self.user}" cannot create resource '
                f'"events" in API group "events.k8s.io" in the namespace "{m.group(1)}"',
                "Forbidden",
                {"group": "events.k8s.io", "kind": "events"},
            )
        else:
            return status_body(
                403,
                f'nodes is forbidden: User "{self.user}" cannot list resource "nodes" in '
                f'API group "" at the cluster scope',
                "Forbidden",
                {"kind": "nodes"},
            )
        return status_body(
            403,
            f'pods "{name}" is forbidden: User "{self.user}" cannot {verb} resource '
            f'"{resource}" in API group "" in the namespace "{namespace}"',
            "Forbidden",
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
        code, answer, headers = self.api._handle(request)
        payload = json.dumps(answer, separators=(",", ":")).encode()
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

    def log_message(self, format: str, *args: Any) -> None:
        pass


def client_for(server: FakeKubeAPI, token: str | None = None) -> kubernetes.client.ApiClient:
    """An ApiClient for `server`: its own Configuration, never the global default.

    `token` defaults to the server's token; pass "" to send no Authorization header, or
    another string to send a wrong one.
    """
    configuration = kubernetes.client.Configuration(host=server.url)
    configuration.retries = False  # as extender.kube.load_api_client sets it
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
