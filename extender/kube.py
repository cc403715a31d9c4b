"""The Kubernetes API edge: client setup, pod binding, pod and node reads.

This is the only module that imports the `kubernetes` client. Every API or transport
failure leaves it as a `KubeError`; callers never see `ApiException` or urllib3 errors.
The methods block: run them in a thread, off the event loop.
"""

from __future__ import annotations

import datetime
import functools
import os
import re
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import kubernetes.client
import kubernetes.config
import orjson
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from extender.model import NodeInfo, PodEvent
from extender.pods import PodError, PodFacts, cpu_cores, read_pod
from extender.redaction import redact

# The `kubernetes` package leaves these unannotated.
_new_client_from_config: Callable[..., kubernetes.client.ApiClient] = (
    kubernetes.config.new_client_from_config
)
_load_incluster_config: Callable[..., None] = kubernetes.config.load_incluster_config

__all__ = [
    "KubeAlreadyBound",
    "KubeClient",
    "KubeError",
    "KubeUnavailable",
    "load_api_client",
]

BIND_BOUND = "bound"
BIND_ALREADY_BOUND = "already-bound"

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_ALREADY_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')
_MAX_MESSAGE = 500
REPORTING_CONTROLLER = "decice.io/extender"
_LIST_PAGE = 500


# --- errors -------------------------------------------------------------------------


class KubeError(Exception):
    """A Kubernetes API call failed; `str()` is a one-line message for the operator."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = _clean(message)
        super().__init__(self.message)

    def __str__(self) -> str:
        reason = self.reason or _phrase(self.status) or "error"
        if self.status is None:
            return f"Kubernetes API {reason}: {self.message}"
        return f"Kubernetes API {self.status} {reason}: {self.message}"


# Only the kinds production code tells apart get a class; the rest is KubeError with its
# HTTP `status` and API `reason` (401, 403, 404, a UID conflict...).


class KubeAlreadyBound(KubeError):
    """409: the pod is already assigned to `node` (a retried bind to the same node is a
    success, since the API is not idempotent)."""

    def __init__(
        self, message: str, *, node: str, status: int | None = 409, reason: str = "Conflict"
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.node = node


class KubeUnavailable(KubeError):
    """Timeouts, refused connections, or 429/5xx answers: the ones worth a retry."""


def _clean(message: str) -> str:
    redacted = redact(" ".join(message.split()))
    if len(redacted) > _MAX_MESSAGE:
        return redacted[: _MAX_MESSAGE - 3] + "..."
    return redacted


def _phrase(status: int | None) -> str:
    if status is None:
        return ""
    try:
        return HTTPStatus(status).phrase.replace(" ", "")
    except ValueError:
        return ""


def _error_from_status(status: int, body: bytes | str | None, http_reason: str | None) -> KubeError:
    """Map an HTTP error answer (a `Status` object, usually) to our hierarchy."""
    message, reason = "", ""
    if body:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or "")
            reason = str(doc.get("reason") or "")
        elif isinstance(body, bytes):
            message = body.decode("utf-8", "replace")
        else:
            message = body
    reason = reason or _phrase(status) or (http_reason or "")
    message = message or http_reason or "no message"
    if status == 409:
        assigned = _ALREADY_ASSIGNED.search(message)
        if assigned:
            return KubeAlreadyBound(message, node=assigned.group(1), status=status, reason=reason)
    if status in _RETRYABLE_STATUS or status >= 500:
        return KubeUnavailable(message, status=status, reason=reason)
    return KubeError(message, status=status, reason=reason)


def _error_from_api_exception(exc: ApiException) -> KubeError:
    status = int(exc.status or 0)
    if status == 0:
        # The client reports TLS failures as status 0: a setup problem, not a blip.
        return KubeError(str(exc.reason or "request failed"), reason="TLSError")
    return _error_from_status(status, exc.body, exc.reason)


def _error_from_transport(exc: urllib3.exceptions.HTTPError) -> KubeError:
    cause: BaseException = exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        cause = exc.reason
    if isinstance(cause, urllib3.exceptions.SSLError):
        return KubeError(str(cause), reason="TLSError")
    if isinstance(cause, urllib3.exceptions.NewConnectionError):
        # Checked first: urllib3 makes it a subclass of ConnectTimeoutError.
        return KubeUnavailable(str(cause), reason="Unreachable")
    if isinstance(cause, urllib3.exceptions.TimeoutError):
        return KubeUnavailable(str(cause), reason="Timeout")
    return KubeUnavailable(str(cause), reason="Unreachable")


def _retryable(err: KubeError) -> bool:
    return isinstance(err, KubeUnavailable) and (
        err.status is None or err.status in _RETRYABLE_STATUS
    )


# --- client setup ---------------------------------------------------------------------


def _fresh_configuration() -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    # KubeClient retries itself (bounded, and aware that a bind is not idempotent);
    # urllib3's own silent retries would multiply the attempts.
    configuration.retries = False
    return configuration


def load_api_client(kubeconfig: str | None) -> kubernetes.client.ApiClient:
    """A `kubernetes.client.ApiClient` for `kubeconfig`, or in-cluster, or the default file.

    With a path, that kubeconfig is loaded. Without one, the pod's service account is
    tried first, then `$KUBECONFIG` / `~/.kube/config`. The process-wide default
    configuration of the `kubernetes` package is never touched.
    """
    try:
        if kubeconfig is not None:
            return _new_client_from_config(
                config_file=kubeconfig,
                client_configuration=_fresh_configuration(),
                persist_config=False,
            )
        configuration = _fresh_configuration()
        try:
            _load_incluster_config(client_configuration=configuration)
        except ConfigException as in_cluster:
            default = os.environ.get("KUBECONFIG") or "~/.kube/config"
            try:
                return _new_client_from_config(
                    config_file=default,
                    client_configuration=_fresh_configuration(),
                    persist_config=False,
                )
            except ConfigException as from_file:
                raise KubeError(
                    f"not in a cluster ({in_cluster}) and no usable kubeconfig at "
                    f"{default} ({from_file})",
                    reason="ConfigError",
                ) from from_file
        return kubernetes.client.ApiClient(configuration)
    except KubeError:
        raise
    except Exception as exc:  # YAML, I/O, exec plugins: all a config problem here
        where = kubeconfig or "in-cluster config"
        raise KubeError(f"cannot load {where}: {exc}", reason="ConfigError") from exc


# --- the client -----------------------------------------------------------------------


class KubeClient:
    """Blocking Kubernetes calls with timeouts, bounded retries and mapped errors.

    `retries` extra attempts follow a 429, 5xx, timeout or connection error, after
    `backoff`, then twice that, and so on. Each attempt is limited to `timeout` seconds.
    """

    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self._api = api
        self._core = kubernetes.client.CoreV1Api(api)
        self._timeout = timeout
        self._retries = retries
        self._backoff = max(backoff, 0.0)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind pod `namespace/name` to `node`: "bound", or "already-bound" if it is there.

        `uid` is sent as the precondition, so a pod deleted and recreated under the same
        name is not bound by mistake; an empty `uid` sends no precondition. Raises
        `KubeAlreadyBound` when the pod sits on another node, `KubeError` 409 when the
        UID does not match, 404 when the pod is gone.
        """
        for arg, value in (("namespace", namespace), ("name", name), ("node", node)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"bind: {arg} must be a non-empty string, got {value!r}")
        metadata = kubernetes.client.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None)
        body = kubernetes.client.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=metadata,
            target=kubernetes.client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            self._call(
                f"POST /api/v1/namespaces/{namespace}/pods/{name}/binding",
                lambda: self._core.create_namespaced_pod_binding(
                    name=name,
                    namespace=namespace,
                    body=body,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
            )
        except KubeAlreadyBound as err:
            # The API answers a repeated bind with 409 even for the same node; a retry
            # after a lost answer lands here, and it is a success.
            if err.node == node:
                return BIND_ALREADY_BOUND
            raise
        return BIND_BOUND

    def create_event(self, event: PodEvent) -> None:
        """POST an events.k8s.io/v1 Event about a pod (once: events are best-effort)."""
        body: Any = {  # a plain dict: the client sends it as it is
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # generateName must be a DNS subdomain prefix: "<pod>-", never "<pod>."
            "metadata": {"generateName": f"{event.name[:200]}-", "namespace": event.namespace},
            "eventTime": _micro_time(event.time),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": event.instance[:128],
            "action": event.action,
            "reason": event.reason,
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": event.namespace,
                "name": event.name,
                "uid": event.uid,
            },
            "note": event.note[:1024],
            "type": event.type,
        }
        # Not EventsV1Api.create_namespaced_event: it validates the dict into a model first,
        # and the model writes eventTime back without its microseconds, which a MicroTime
        # does not parse. The request is sent as written here.
        path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events"
        request = self._api.param_serialize(
            method="POST",
            resource_path=path,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        self._call(
            f"POST {path}",
            lambda: self._api.call_api(*request, _request_timeout=self._timeout).response,
            retries=0,
        )

    def get_pod(self, namespace: str, name: str) -> PodFacts:
        """The pod, read as the filter path reads it; `KubeError` 404 when it is gone."""
        if not namespace or not name:
            raise ValueError("get_pod: namespace and name must be non-empty")
        doc = self._call(
            f"GET /api/v1/namespaces/{namespace}/pods/{name}",
            lambda: self._core.read_namespaced_pod(
                name=name,
                namespace=namespace,
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )
        try:
            return read_pod(doc)
        except PodError as exc:
            raise KubeError(
                f"unexpected pod {namespace}/{name}: {exc!r}", reason="BadResponse"
            ) from exc

    def list_nodes(self) -> list[NodeInfo]:
        """Every node: name, InternalIP addresses and allocatable CPU cores."""
        nodes: list[NodeInfo] = []
        token: str | None = None
        while True:
            doc = self._call(
                "GET /api/v1/nodes",
                functools.partial(
                    self._core.list_node,
                    limit=_LIST_PAGE,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
            )
            try:
                nodes.extend(_node_info(item) for item in doc.get("items") or ())
                token = (doc.get("metadata") or {}).get("continue") or None
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise KubeError(f"unexpected node list: {exc!r}", reason="BadResponse") from exc
            if token is None:
                return nodes

    def _call(self, what: str, request: Callable[[], Any], retries: int | None = None) -> Any:
        """Run `request` (raw response), retrying transient failures; the decoded JSON."""
        retries = self._retries if retries is None else retries
        attempt = 0
        while True:
            cause: Exception | None = None
            try:
                response = request()
                try:
                    data: bytes = response.data
                finally:
                    response.release_conn()
                # The typed API methods raise ApiException on an error answer; a request
                # sent through ApiClient.call_api returns it: both end up here.
                status = int(getattr(response, "status", 200))
                if status < 400:
                    try:
                        return orjson.loads(data) if data else {}
                    except orjson.JSONDecodeError as exc:
                        raise KubeError(
                            f"{what}: answer is not JSON: {exc}", reason="BadResponse"
                        ) from exc
                err = _error_from_status(status, data, getattr(response, "reason", None))
            except ApiException as exc:
                cause = exc
                err = _error_from_api_exception(exc)
            except urllib3.exceptions.HTTPError as exc:
                cause = exc
                err = _error_from_transport(exc)
            if not _retryable(err) or attempt >= retries:
                if isinstance(err, KubeUnavailable):
                    err.message = f"{what}: {err.message} (gave up after {attempt + 1} attempts)"
                raise err from cause
            time.sleep(self._backoff * (2**attempt))
            attempt += 1


def _micro_time(seconds: float) -> str:
    """A MicroTime as the API server writes it: 2026-11-23T13:26:23.000000Z."""
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _node_info(doc: Any) -> NodeInfo:
    status = doc.get("status") or {}
    addresses = status.get("addresses") or ()
    cpu = (status.get("allocatable") or {}).get("cpu")
    return NodeInfo(
        name=doc["metadata"]["name"],
        internal_ips=tuple(a["address"] for a in addresses if a.get("type") == "InternalIP"),
        cpu_cores=cpu_cores(cpu) if isinstance(cpu, str) else None,
    )
