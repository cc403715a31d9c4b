"""The Kubernetes API edge: client setup and every API call, async, on the event loop.

This is the only module that imports the `kubernetes` package (for its configuration
loading: kubeconfig, in-cluster, token refresh hooks) and aiohttp (the HTTP client).
Every API or transport failure leaves it as a `KubeError`; callers never see aiohttp,
ssl or socket errors.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import errno
import os
import re
import socket
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import kubernetes.client
import kubernetes.config
import orjson
from kubernetes.config.config_exception import ConfigException

from extender.model import NodeInfo, PodEvent
from extender.nodes import node_info
from extender.pods import PodError, PodFacts, read_pod
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
    "KubeEvictionRefused",
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
#: list_pods gives up after this many pages by default (500 pods each: 50 000 pods).
MAX_LIST_PAGES = 100
#: The longest watch event line accepted (a hostile server cannot exhaust memory).
MAX_WATCH_LINE = 16 * 1024 * 1024
#: A watch stream may be silent for its whole `timeoutSeconds`; the read timeout is longer.
_WATCH_GRACE = 10.0
_JSON = "application/json"
_MERGE_PATCH = "application/merge-patch+json"
_USER_AGENT = "decice-extender"


# --- errors -------------------------------------------------------------------------


class KubeError(Exception):
    """A Kubernetes API call failed; `str()` is a one-line message for the operator."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = _clean(message)
        #: `details` of the API's `Status` answer (causes, retryAfterSeconds...), or {}
        self.details: Mapping[str, Any] = details or {}
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


class KubeEvictionRefused(KubeError):
    """429 to an eviction: a PodDisruptionBudget allows no disruption now (or the API
    server throttles). Not retried by `evict`: the caller tries again in a later cycle,
    not before `retry_after` seconds when the server named them
    (`details.retryAfterSeconds`, e.g. a budget still being processed). `causes` holds the
    messages of the answer's causes ("The disruption budget pdb-g needs 1 healthy pods
    and has 1 currently"), also appended to `message`."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
        status: int | None = 429,
        reason: str = "TooManyRequests",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        if causes:
            message = f"{message} ({'; '.join(causes)})"
        super().__init__(message, status=status, reason=reason, details=details)
        self.retry_after = retry_after
        self.causes = causes

    @classmethod
    def from_error(cls, err: KubeError) -> KubeEvictionRefused:
        details = err.details
        raw = details.get("retryAfterSeconds")
        retry_after = float(raw) if isinstance(raw, int | float) and raw > 0 else None
        causes = tuple(
            _clean(str(cause.get("message")))
            for cause in details.get("causes") or ()
            if isinstance(cause, dict) and cause.get("message")
        )
        return cls(
            err.message,
            retry_after=retry_after,
            causes=causes,
            status=err.status,
            reason=err.reason or "TooManyRequests",
            details=details,
        )


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
    details: dict[str, Any] = {}
    if body:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or "")
            reason = str(doc.get("reason") or "")
            if isinstance(doc.get("details"), dict):
                details = doc["details"]
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
        return KubeUnavailable(message, status=status, reason=reason, details=details)
    return KubeError(message, status=status, reason=reason, details=details)


def _is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):  # aiohttp wraps; the ssl error may be the cause
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError | aiohttp.ClientSSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _error_from_transport(exc: BaseException, where: str, timeout: float | None) -> KubeError:
    """Map an aiohttp / socket / ssl failure (no HTTP answer) to our hierarchy."""
    if _is_tls_failure(exc):
        return KubeError(f"TLS with {where} failed: {exc}", reason="TLSError")
    if isinstance(exc, TimeoutError):
        within = f" within {timeout:g} s" if timeout is not None else ""
        return KubeUnavailable(f"no answer from {where}{within}", reason="Timeout")
    if isinstance(exc, aiohttp.ClientConnectorError):
        where = f"{exc.host}:{exc.port}"
        cause = exc.os_error
        if isinstance(cause, socket.gaierror) or isinstance(exc, _DNS_ERRORS):
            return KubeUnavailable(
                f"cannot resolve {exc.host}: {cause.strerror or cause}", reason="Unreachable"
            )
        if isinstance(cause, ConnectionRefusedError) or cause.errno == errno.ECONNREFUSED:
            return KubeUnavailable(
                f"cannot connect to {where}: connection refused", reason="Unreachable"
            )
        return KubeUnavailable(
            f"cannot connect to {where}: {cause.strerror or cause}", reason="Unreachable"
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return KubeUnavailable(
            f"{where} closed the connection before answering", reason="Unreachable"
        )
    detail = str(exc) or type(exc).__name__
    return KubeUnavailable(f"{where}: {detail}", reason="Unreachable")


def _retryable(err: KubeError) -> bool:
    return isinstance(err, KubeUnavailable) and (
        err.status is None or err.status in _RETRYABLE_STATUS
    )


_TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
# aiohttp >= 3.11 tells DNS failures apart.
_DNS_ERRORS: tuple[type[BaseException], ...] = tuple(
    error for error in (getattr(aiohttp, "ClientConnectorDNSError", None),) if error is not None
)


# --- client setup ---------------------------------------------------------------------


def _fresh_configuration() -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    # KubeClient retries itself (bounded, and aware that a bind is not idempotent).
    configuration.retries = False
    return configuration


def load_api_client(kubeconfig: str | None) -> kubernetes.client.ApiClient:
    """A `kubernetes.client.ApiClient` for `kubeconfig`, or in-cluster, or the default file.

    With a path, that kubeconfig is loaded. Without one, the pod's service account is
    tried first, then `$KUBECONFIG` / `~/.kube/config`. The process-wide default
    configuration of the `kubernetes` package is never touched. `KubeClient` takes its
    `configuration`.
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


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    """The TLS settings of a `kubernetes.client.Configuration` as an `ssl.SSLContext`."""
    cafile = configuration.ssl_ca_cert or None
    cadata = getattr(configuration, "ca_cert_data", None) or None
    context = ssl.create_default_context(cafile=cafile, cadata=cadata)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def _proxy(configuration: Any, host: str) -> str | None:
    proxy = getattr(configuration, "proxy", None) or None
    if proxy is None:
        return None
    if str(proxy).lower().startswith("socks"):
        raise KubeError(f"SOCKS proxies are not supported: {proxy}", reason="ConfigError")
    no_proxy = getattr(configuration, "no_proxy", None) or ""
    if no_proxy:
        try:
            from kubernetes.client.rest import should_bypass_proxies
        except ImportError:  # an older `kubernetes`: no no_proxy support there either
            return str(proxy)
        if should_bypass_proxies(host, no_proxy=no_proxy):
            return None
    return str(proxy)


# --- the client -----------------------------------------------------------------------


class KubeClient:
    """Async Kubernetes calls with timeouts, bounded retries and mapped errors.

    `retries` extra attempts follow a 429, 5xx, timeout or connection error, after
    `backoff`, then twice that, and so on. Each attempt is limited to `timeout` seconds.
    The HTTP session (at most `max_connections` connections, open watches included) opens
    on the first call, in the running event loop; `close()` closes it, and a later call
    opens a new one, in whatever loop runs then. A session left open closes when its loop
    shuts down.
    """

    def __init__(
        self,
        configuration: kubernetes.client.Configuration | kubernetes.client.ApiClient,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
        max_connections: int = 16,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        # Typed loosely: the `kubernetes` package's own annotations are partial.
        config: Any = configuration
        if isinstance(config, kubernetes.client.ApiClient):
            config = config.configuration
        self._configuration = config
        self._timeout = timeout
        self._retries = retries
        self._backoff = max(backoff, 0.0)
        self._max_connections = max_connections
        self._base = str(config.host or "").rstrip("/")
        url = urlsplit(self._base)
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            port = 0
        if url.scheme not in ("http", "https") or not url.hostname or not port:
            raise KubeError(f"not an API server URL: {self._base!r}", reason="ConfigError")
        self._where = f"{url.hostname}:{port}"
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            try:
                self._ssl = _ssl_context(config)
            except (OSError, ValueError) as exc:
                raise KubeError(f"bad TLS settings: {exc}", reason="ConfigError") from exc
        self._options: dict[str, Any] = {"allow_redirects": False}
        # Sent with each request through a plain-HTTP proxy (aiohttp sends its
        # proxy_headers only on the CONNECT of a tunnel).
        self._static: dict[str, str] = {}
        proxy = _proxy(config, self._base)
        if proxy is not None:
            self._options["proxy"] = proxy
            if config.proxy_headers:
                if self._ssl is not None:
                    self._options["proxy_headers"] = dict(config.proxy_headers)
                else:
                    self._static.update(config.proxy_headers)
        server_name = config.tls_server_name or (
            config.assert_hostname
            if isinstance(config.assert_hostname, str) and config.assert_hostname
            else None
        )
        if self._ssl is not None and server_name:
            self._options["server_hostname"] = str(server_name)
        if config.username or config.password:
            pair = f"{config.username or ''}:{config.password or ''}".encode()
            self._static["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        self._timeouts = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    # --- session ---

    def _http(self) -> aiohttp.ClientSession:
        """The session of the running loop, opened on first use."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None:
            _abandon(session, self._loop)
        self._guard = None
        connector = aiohttp.TCPConnector(
            limit=self._max_connections, ssl=self._ssl if self._ssl is not None else True
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeouts,
            headers={"Accept": _JSON, "User-Agent": _USER_AGENT},
            trust_env=False,
        )
        self._loop = loop
        self._guard = _closed_with_the_loop(self._session)
        return self._session

    async def close(self) -> None:
        """Close the HTTP session (its connections); the next call opens a new one."""
        session, loop, guard = self._session, self._loop, self._guard
        self._session, self._loop, self._guard = None, None, None
        if session is None or session.closed:
            return
        if loop is not asyncio.get_running_loop():
            _abandon(session, loop)
        elif guard is not None:
            await guard.aclose()  # closes the session
        else:
            await session.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        """Per-request headers: auth from the configuration, asked each time, so refresh
        hooks (in-cluster token rotation, exec plugins) take effect."""
        headers = self._static.copy()
        for setting in self._configuration.auth_settings().values():
            value = setting.get("value")
            if value and setting.get("in") == "header":
                key = str(setting["key"])
                headers["Authorization" if key.lower() == "authorization" else key] = value
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    # --- requests ---

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str = _JSON,
        params: Mapping[str, str] | None = None,
        retries: int | None = None,
        final: Collection[int] = (),
    ) -> Any:
        """Send, retrying transient failures (but answers whose status is in `final`);
        the decoded JSON answer."""
        retries = self._retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return await self._once(method, path, body, content_type, params)
            except KubeError as err:
                if err.status in final:
                    raise
                if not _retryable(err) or attempt >= retries:
                    if isinstance(err, KubeUnavailable):
                        err.message = (
                            f"{method} {path}: {err.message} (gave up after {attempt + 1} attempts)"
                        )
                    raise
            await asyncio.sleep(self._backoff * (2**attempt))
            attempt += 1

    async def _once(
        self,
        method: str,
        path: str,
        body: bytes | None,
        content_type: str,
        params: Mapping[str, str] | None,
    ) -> Any:
        headers = self._headers(content_type if body is not None else None)
        try:
            async with self._http().request(
                method,
                self._base + path,
                data=body,
                params=params,
                headers=headers,
                **self._options,
            ) as response:
                data = await response.read()
                status, http_reason = response.status, response.reason
        except _TRANSPORT_ERRORS as exc:
            raise _error_from_transport(exc, self._where, self._timeout) from exc
        if status >= 300:
            raise _error_from_status(status, data, http_reason)
        if not data:
            return {}
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KubeError(
                f"{method} {path}: answer is not JSON: {exc}", reason="BadResponse"
            ) from exc

    # --- the calls ---

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind pod `namespace/name` to `node`: "bound", or "already-bound" if it is there.

        `uid` is sent as the precondition, so a pod deleted and recreated under the same
        name is not bound by mistake; an empty `uid` sends no precondition. Raises
        `KubeAlreadyBound` when the pod sits on another node, `KubeError` 409 when the
        UID does not match, 404 when the pod is gone.
        """
        for arg, value in (("namespace", namespace), ("name", name), ("node", node)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"bind: {arg} must be a non-empty string, got {value!r}")
        metadata = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = orjson.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
        )
        try:
            await self._request(
                "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body
            )
        except KubeAlreadyBound as err:
            # The API answers a repeated bind with 409 even for the same node; a retry
            # after a lost answer lands here, and it is a success.
            if err.node == node:
                return BIND_ALREADY_BOUND
            raise
        return BIND_BOUND

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """Evict pod `namespace/name` through the Eviction API (policy/v1 `Eviction`), with
        `uid` as the delete precondition, so a pod re-created under the name is left alone
        (an empty `uid` sends none).

        Success means the API accepted it: the pod is terminating (it keeps running until
        its kubelet stops it), or is gone at once if it was Pending. Raises
        `KubeEvictionRefused` (429) when a PodDisruptionBudget refuses, never retried here;
        `KubeError` 404 when the pod is gone, 409 `Conflict` when its UID differs, 400
        `BadRequest` for a body the API rejects. Timeouts, connection errors and 5xx are
        retried (a repeated eviction of a terminating pod is accepted again).
        """
        for arg, value in (("namespace", namespace), ("name", name)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"evict: {arg} must be a non-empty string, got {value!r}")
        doc: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:
            doc["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            await self._request(
                "POST",
                f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                body=orjson.dumps(doc),
                final=(429,),
            )
        except KubeError as err:
            if err.status == 429:
                raise KubeEvictionRefused.from_error(err) from err
            raise

    async def list_pods(
        self,
        field_selector: str = "",
        *,
        namespace: str | None = None,
        limit: int = _LIST_PAGE,
        max_pages: int = MAX_LIST_PAGES,
    ) -> AsyncIterator[dict[str, Any]]:
        """The pods matching `field_selector` (e.g. "spec.schedulerName=decice_sched,
        status.phase=Running"), of every namespace or of `namespace`, as the API lists
        them (items without kind / apiVersion), read `limit` at a time following
        `continue` tokens: one page in memory at a time.

        Raises `KubeError` (reason "TooManyPages") when a `max_pages`-th page still
        announces more, and the API's error for a failed page (a 410 `Expired` when a
        `continue` token went stale: list again). Pages are retried like any read.
        """
        if max_pages < 1:
            raise ValueError("list_pods: max_pages must be >= 1")
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        token: str | None = None
        for _ in range(max_pages):
            doc = await self.list_page(
                path, limit=limit, continue_token=token, field_selector=field_selector
            )
            items = doc.get("items") or ()
            metadata = doc.get("metadata") or {}
            if not isinstance(items, list | tuple) or not isinstance(metadata, dict):
                raise KubeError(f"GET {path}: unexpected pod list", reason="BadResponse")
            for item in items:
                if isinstance(item, dict):
                    yield item
            token = metadata.get("continue") or None
            if token is None:
                return
        raise KubeError(
            f"GET {path}: more than {max_pages} pages of {limit} pods; gave up",
            reason="TooManyPages",
        )

    async def create_event(self, event: PodEvent) -> None:
        """POST an events.k8s.io/v1 Event about a pod (once: events are best-effort)."""
        body = {
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
        path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events"
        await self._request("POST", path, body=orjson.dumps(body), retries=0)

    async def get_pod(self, namespace: str, name: str) -> PodFacts:
        """The pod, read as the filter path reads it; `KubeError` 404 when it is gone."""
        if not namespace or not name:
            raise ValueError("get_pod: namespace and name must be non-empty")
        doc = await self._request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        try:
            return read_pod(doc)
        except PodError as exc:
            raise KubeError(
                f"unexpected pod {namespace}/{name}: {exc!r}", reason="BadResponse"
            ) from exc

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
    ) -> None:
        """Set (or, for None, remove) annotations of a pod with a JSON merge patch.

        `uid` rides in the patch as a precondition: the API answers 422 `Invalid` ("field
        is immutable") when the pod was re-created under the name, 404 when it is gone. An
        empty `uid` sends no precondition. Retried on transient failures (idempotent).
        """
        if not namespace or not name:
            raise ValueError("annotate_pod: namespace and name must be non-empty")
        metadata: dict[str, Any] = {"annotations": dict(annotations)}
        if uid:
            metadata = {"uid": uid, **metadata}
        await self._request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            body=orjson.dumps({"metadata": metadata}),
            content_type=_MERGE_PATCH,
        )

    async def list_page(
        self,
        path: str,
        *,
        limit: int,
        continue_token: str | None = None,
        field_selector: str = "",
    ) -> dict[str, Any]:
        """One page of a list (`GET path?limit=N&continue=T&fieldSelector=S`), decoded as
        it came.

        `list_page("/api/v1/pods", limit=1)["metadata"]["resourceVersion"]` starts a watch
        from now without listing every pod."""
        if limit < 1:
            raise ValueError("list_page: limit must be >= 1")
        params = {"limit": str(limit)}
        if continue_token:
            params["continue"] = continue_token
        if field_selector:
            params["fieldSelector"] = field_selector
        doc = await self._request("GET", path, params=params)
        if not isinstance(doc, dict):
            raise KubeError(f"GET {path}: answer is not a list", reason="BadResponse")
        return doc

    async def list_nodes(self) -> tuple[list[NodeInfo], str]:
        """Every node (name, InternalIP addresses, allocatable CPU cores), and the list's
        resourceVersion, to watch from."""
        nodes: list[NodeInfo] = []
        version = ""
        token: str | None = None
        while True:
            doc = await self.list_page("/api/v1/nodes", limit=_LIST_PAGE, continue_token=token)
            try:
                nodes.extend(node_info(item) for item in doc.get("items") or ())
                metadata = doc.get("metadata") or {}
                version = version or str(metadata.get("resourceVersion") or "")
                token = metadata.get("continue") or None
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise KubeError(f"unexpected node list: {exc!r}", reason="BadResponse") from exc
            if token is None:
                return nodes, version

    async def access_review(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str = "",
    ) -> tuple[bool, str]:
        """May we `verb` `resource` (in `group`, its `subresource`)? A SelfSubjectAccessReview
        (fixture selfsubjectaccessreview.json): `(allowed, reason)`, the reason as the
        authorizer gave it (RBAC leaves it empty on a denial), or its evaluationError. An
        empty `namespace` asks about every namespace (the cluster scope)."""
        if not verb or not resource:
            raise ValueError("access_review: verb and resource must be non-empty")
        attributes: dict[str, str] = {}
        if namespace:
            attributes["namespace"] = namespace
        attributes.update(verb=verb, group=group, resource=resource)
        if subresource:
            attributes["subresource"] = subresource
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        doc = await self._request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=orjson.dumps(body),
        )
        status = doc.get("status") if isinstance(doc, dict) else None
        if not isinstance(status, dict) or not isinstance(status.get("allowed"), bool):
            raise KubeError(
                "SelfSubjectAccessReview: answer without status.allowed", reason="BadResponse"
            )
        reason = str(status.get("reason") or status.get("evaluationError") or "")
        return bool(status["allowed"]), _clean(reason)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        bookmarks: bool = True,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events of a watch from `resource_version` (`{"type": ..., "object": ...}`),
        `ERROR` events included, until the server ends the stream (at `timeout_seconds`).

        Not retried: an error answer raises its `KubeError`, a stream that breaks raises
        `KubeUnavailable`. Iterate under `contextlib.aclosing` to free the connection when
        leaving early.
        """
        if timeout_seconds < 1:
            raise ValueError("watch: timeout_seconds must be >= 1")
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        silence = timeout_seconds + max(_WATCH_GRACE, self._timeout)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout, sock_read=silence)
        what = f"watch {path}"
        streaming = False
        try:
            async with self._http().get(
                self._base + path,
                params=params,
                headers=self._headers(),
                timeout=timeout,
                **self._options,
            ) as response:
                if response.status >= 300:
                    err = _error_from_status(
                        response.status, await response.read(), response.reason
                    )
                    err.message = f"{what}: {err.message}"
                    raise err
                streaming = True
                buffer = bytearray()
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    begin = 0
                    while (end := buffer.find(b"\n", begin)) != -1:
                        line = buffer[begin:end]
                        begin = end + 1
                        if line.strip():
                            yield _watch_event(line, what)
                    del buffer[:begin]
                    if len(buffer) > MAX_WATCH_LINE:
                        raise KubeError(
                            f"{what}: an event is longer than {MAX_WATCH_LINE} bytes",
                            reason="BadResponse",
                        )
                if buffer.strip():
                    yield _watch_event(buffer, what)
        except _TRANSPORT_ERRORS as exc:
            if not streaming:
                err = _error_from_transport(exc, self._where, self._timeout)
                err.message = f"{what}: {err.message}"
                raise err from exc
            if isinstance(exc, TimeoutError):
                raise KubeUnavailable(
                    f"{what}: the watch stream was silent for more than {silence:g} s",
                    reason="Timeout",
                ) from exc
            raise KubeUnavailable(
                f"{what}: the watch stream broke: {exc or type(exc).__name__}",
                reason="Unreachable",
            ) from exc


def _watch_event(line: bytearray, what: str) -> dict[str, Any]:
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise KubeError(f"{what}: an event is not JSON: {exc}", reason="BadResponse") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise KubeError(f"{what}: an event without a type", reason="BadResponse")
    return event


def _closed_with_the_loop(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """An async generator, started and left suspended, that closes `session` when it is
    finalized: the event loop's shutdown (`asyncio.run`, `asyncio.Runner`, uvicorn) closes
    every async generator still open, so a session whose owner forgot `close()` still
    closes its connections in its own loop, before the loop is gone."""

    async def guard() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await session.close()

    generator = guard()
    step = generator.asend(None)  # registers it with the running loop's asyncgen hooks
    with contextlib.suppress(StopIteration):
        step.send(None)  # runs to the `yield`: nothing there awaits
    return generator


def _abandon(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop | None) -> None:
    """Drop a session of another event loop: close it there if that loop still runs, else
    drop its connections without a loop (a closed loop already lost its transports)."""
    if session.closed:
        return
    if loop is not None and loop.is_running() and not loop.is_closed():
        asyncio.run_coroutine_threadsafe(session.close(), loop)
        return
    connector = session.connector
    session.detach()
    if connector is not None:
        connector._close()


def _micro_time(seconds: float) -> str:
    """A MicroTime as the API server writes it: 2026-11-23T13:26:23.000000Z."""
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
