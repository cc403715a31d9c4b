"""Typed, frozen settings: the policy YAML plus environment overrides, validated once.

`load_settings` collects every problem before failing, so an operator fixes the file
in one round trip instead of one key per restart. The format is documented in
docs/configuration.md. This module does no I/O except reading the file it is given.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

Direction = Literal["lower", "higher"]
Normalize = Literal["range", "candidates"]
MissingPolicy = Literal["fail-open", "fail-closed"]
ForeignPods = Literal["refuse", "bind"]
ProviderKind = Literal["prometheus", "static"]

DEFAULT_CPU_QUERY = """max by (node) (
  instance:node_cpu_utilisation:rate5m{job="node-exporter"}
  * on (namespace, pod) group_left (node)
    topk by (namespace, pod) (1, node_namespace_pod:kube_pod_info:)
)"""

DEFAULT_SCHEDULER_NAME = "decice_sched"
"""The scheduler profile whose pods are ours when `schedulerNames` is not set."""

_METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ConfigError(ValueError):
    """The policy is invalid; `problems` lists every bad key with what is wrong."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


@dataclass(frozen=True, slots=True)
class TLSSettings:
    cert_file: str | None = None
    """Server certificate (PEM). TLS is on when cert_file and key_file are set."""
    key_file: str | None = None
    """Private key of cert_file (PEM)."""
    client_ca_file: str | None = None
    """CA bundle for client certificates; set it to require mutual TLS."""

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    """Listen address. Loopback by default: the scheduler runs beside us in the pod."""
    port: int = 8888
    url_prefix: str = ""
    """Path prefix: "/scheduler" serves /scheduler/filter and so on."""
    max_body_bytes: int = 32 * 1024 * 1024
    """Bodies larger than this get 413 (5,000 full Nodes are about 25 MB)."""
    grace_period: float = 10.0
    """Seconds to finish in-flight requests on SIGTERM."""
    tls: TLSSettings = field(default_factory=TLSSettings)
    metrics_port: int | None = None
    """A second listener serving only /metrics, /healthz and /readyz, for Prometheus and
    kubelet probes on the pod IP, while the verbs stay on `host` (loopback). Unset: those
    paths are served beside the verbs."""
    metrics_host: str = "0.0.0.0"
    """Listen address of the metrics listener."""

    @property
    def verbs_exposed(self) -> bool:
        """The verbs listener is reachable from outside this pod (not loopback)."""
        return not is_loopback(self.host)


def exposure_problem(server: ServerSettings, bind_enabled: bool) -> str | None:
    """Why these verbs must not listen where they would, or None: /bind must never be
    reachable from outside the pod unless clients must show a certificate (mutual TLS)."""
    if not bind_enabled or not server.verbs_exposed or server.tls.client_ca_file is not None:
        return None
    return (
        f"{server.host!r} would let anyone who reaches this pod bind pods (/bind); keep "
        "the verbs on 127.0.0.1 and serve Prometheus and probes with server.metricsPort, "
        "or require client certificates (server.tls.clientCAFile)"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password_file: str


@dataclass(frozen=True, slots=True)
class PrometheusSettings:
    url: str = "http://prometheus-operated.monitoring.svc:9090"
    """Prometheus base URL; PROMETHEUS_URL overrides it."""
    interval: float = 15.0
    """Seconds between refreshes."""
    timeout: float = 5.0
    """Per-query timeout in seconds."""
    max_backoff: float = 120.0
    """Ceiling of the refresh back-off after consecutive errors."""
    node_label: str = "node"
    """Label naming the node; `instance` addresses are mapped through node InternalIPs."""
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token_file: str | None = None
    basic_auth: BasicAuth | None = None
    ca_file: str | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True, slots=True)
class FilterThreshold:
    above: float | None = None
    """A node whose value is greater than this is filtered."""
    below: float | None = None
    """A node whose value is less than this is filtered."""


@dataclass(frozen=True, slots=True)
class MetricSettings:
    name: str
    query: str = ""
    weight: float = 1.0
    direction: Direction = "lower"
    normalize: Normalize = "range"
    min: float = 0.0
    max: float = 1.0
    filter: FilterThreshold | None = None
    on_missing: MissingPolicy = "fail-open"
    max_age: float = 60.0
    """Data older than this many seconds counts as missing."""


@dataclass(frozen=True, slots=True)
class HerdGuardSettings:
    enabled: bool = True
    metric: str = "cpu"
    default_cpu_request: float = 0.1
    """Cores counted for a pod without a CPU request."""
    default_node_cores: float = 4.0
    """Node size used when the node's allocatable CPU is unknown."""
    settle: float = 30.0
    """Seconds after a bind before a newer snapshot may replace the pod's reservation."""


@dataclass(frozen=True, slots=True)
class BindSettings:
    enabled: bool = True
    foreign_pods: ForeignPods = "refuse"
    timeout: float = 1.5
    """Per Kubernetes API call. timeout x (retries + 1) + back-off stays under the
    scheduler's default 5 s httpTimeout, so our Error arrives before its timeout."""
    retries: int = 1

    @property
    def budget(self) -> float:
        """Seconds one bind may take at worst: every attempt timing out, plus the back-off
        between them (RETRY_BACKOFF, doubling)."""
        return self.timeout * (self.retries + 1) + RETRY_BACKOFF * ((1 << self.retries) - 1)


RETRY_BACKOFF = 0.2
"""Seconds before the first retry of a Kubernetes call; doubled for each next one."""


@dataclass(frozen=True, slots=True)
class KubernetesSettings:
    kubeconfig: str | None = None
    """KUBECONFIG overrides; None means in-cluster, then ~/.kube/config."""
    watch_pods: bool = True
    """Watch every pod: the herd guard then counts pods whichever binder placed them, and
    turned-away pods can be requeued (RBAC: list and watch pods)."""
    watch_timeout: int = 300
    """Seconds one watch request stays open before the API server ends it and we resume."""
    node_refresh: float = 60.0
    """Deprecated and ignored: nodes are watched (kept so older policy files still load)."""


@dataclass(frozen=True, slots=True)
class RequeueSettings:
    enabled: bool = True
    """Patch a pod our filter turned away from every node once metrics pass one of them,
    so kube-scheduler retries it now rather than after its 5-minute unschedulable wait
    (needs watchPods; RBAC: patch pods)."""
    patches_per_second: float = 5.0
    keep_seconds: float = 600.0
    """Turned-away pods are forgotten after this long (the scheduler retries them itself
    after 5 minutes, and our filter remembers them again if it still turns them away)."""
    max_pods: int = 10_000


@dataclass(frozen=True, slots=True)
class PrioritizeSettings:
    max_hosts: int | None = None
    """Answer only the best K nodes; the scheduler scores the others 0."""


@dataclass(frozen=True, slots=True)
class ExplainSettings:
    node_metrics: bool = True
    """Export each node's score and metric values in /metrics (decice_node_score,
    decice_node_metric): one series per node and metric, so off for clusters that do not
    want thousands of series."""
    keep_pods: int = 10_000
    """Pods whose last decision is kept (for the bind guard and /explain)."""
    max_nodes: int = 100
    """Nodes listed in one /explain answer (best first; the chosen node always)."""
    events: bool = True
    """Post an Event on every pod we bind (RBAC: create events.k8s.io events)."""
    events_per_second: float = 5.0
    """At most this many Events a second; the rest wait in the queue."""
    event_queue: int = 100
    """Events waiting beyond this are dropped (counted in decice_events_total)."""


@dataclass(frozen=True, slots=True)
class Settings:
    metrics: tuple[MetricSettings, ...]
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME})
    server: ServerSettings = field(default_factory=ServerSettings)
    provider: ProviderKind = "prometheus"
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    static_nodes: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    herd_guard: HerdGuardSettings = field(default_factory=HerdGuardSettings)
    bind: BindSettings = field(default_factory=BindSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    requeue: RequeueSettings = field(default_factory=RequeueSettings)
    prioritize: PrioritizeSettings = field(default_factory=PrioritizeSettings)
    explain: ExplainSettings = field(default_factory=ExplainSettings)

    @property
    def filters_anything(self) -> bool:
        """True when some node can be filtered: a threshold or a fail-closed metric."""
        return any(m.filter is not None or m.on_missing == "fail-closed" for m in self.metrics)


T = TypeVar("T")


class _Reader:
    """Walks the raw YAML, converting values and recording every problem by its key path."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def section(self, raw: Any, path: str, allowed: set[str]) -> dict[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.problems.append(f"{path}: must be a mapping, got {type(raw).__name__}")
            return {}
        for key in sorted(set(map(str, raw)) - allowed):
            self.problems.append(
                f"{path}.{key}: unknown key (allowed: {', '.join(sorted(allowed))})"
            )
        return raw

    def get(
        self,
        raw: dict[str, Any],
        path: str,
        key: str,
        convert: Callable[[Any], T],
        default: T,
        what: str,
    ) -> T:
        if key not in raw or raw[key] is None:
            return default
        try:
            return convert(raw[key])
        except (TypeError, ValueError) as exc:
            detail = f" ({exc})" if str(exc) else ""
            self.problems.append(f"{path}.{key}: must be {what}, got {raw[key]!r}{detail}")
            return default


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("")
    if not math.isfinite(value):
        raise ValueError("not finite")
    return float(value)


def _positive(value: Any) -> float:
    number = _number(value)
    if number <= 0:
        raise ValueError("must be > 0")
    return number


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("")
    return value


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise TypeError("")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("")
    return value


def _choice(*options: str) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if value not in options:
            raise ValueError("")
        return value

    return convert


def _prefix(value: Any) -> str:
    text = _string(value).rstrip("/")
    if text and not text.startswith("/"):
        raise ValueError("must start with '/'")
    return text


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError("")
    return dict(value)


_TOP = {
    "schedulerNames",
    "server",
    "provider",
    "prometheus",
    "static",
    "metrics",
    "herdGuard",
    "bind",
    "kubernetes",
    "requeue",
    "prioritize",
    "explain",
}


def parse_settings(
    raw: Any, environ: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Build Settings from parsed YAML; raise ConfigError naming every bad key."""
    env = environ or {}
    r = _Reader()
    top = r.section(raw, "$", _TOP) if raw is not None else {}
    if raw is None:
        r.problems.append("$: the file is empty")

    names = top.get("schedulerNames", [DEFAULT_SCHEDULER_NAME])
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        r.problems.append(f"schedulerNames: must be a non-empty list of strings, got {names!r}")
        names = [DEFAULT_SCHEDULER_NAME]

    server = _parse_server(r, top.get("server"))
    provider: ProviderKind = r.get(
        top,
        "$",
        "provider",
        _choice("prometheus", "static"),
        "prometheus",
        "one of prometheus, static",
    )
    prometheus = _parse_prometheus(r, top.get("prometheus"), env)
    static_nodes = _parse_static(r, top.get("static"))
    metrics = _parse_metrics(r, top.get("metrics"), provider)
    herd = _parse_herd(r, top.get("herdGuard"), metrics)
    bind = _parse_bind(r, top.get("bind"))
    kube = _parse_kubernetes(r, top.get("kubernetes"), env)
    requeue = _parse_requeue(r, top.get("requeue"))
    prio_raw = r.section(top.get("prioritize"), "prioritize", {"maxHosts"})
    max_hosts = r.get(
        prio_raw, "prioritize", "maxHosts", _non_negative_int, None, "a positive integer or null"
    )
    if max_hosts == 0:
        r.problems.append("prioritize.maxHosts: must be a positive integer or null, got 0")
    explain_raw = r.section(
        top.get("explain"),
        "explain",
        {"nodeMetrics", "keepPods", "maxNodes", "events", "eventsPerSecond", "eventQueue"},
    )
    d_explain = ExplainSettings()
    explain = ExplainSettings(
        node_metrics=r.get(explain_raw, "explain", "nodeMetrics", _boolean, True, "true or false"),
        events=r.get(explain_raw, "explain", "events", _boolean, True, "true or false"),
        events_per_second=r.get(
            explain_raw,
            "explain",
            "eventsPerSecond",
            _positive,
            d_explain.events_per_second,
            "a number > 0",
        ),
        event_queue=max(
            1,
            r.get(
                explain_raw,
                "explain",
                "eventQueue",
                _non_negative_int,
                d_explain.event_queue,
                "a positive integer",
            ),
        ),
        keep_pods=max(
            1,
            r.get(
                explain_raw,
                "explain",
                "keepPods",
                _non_negative_int,
                d_explain.keep_pods,
                "a positive integer",
            ),
        ),
        max_nodes=max(
            1,
            r.get(
                explain_raw,
                "explain",
                "maxNodes",
                _non_negative_int,
                d_explain.max_nodes,
                "a positive integer",
            ),
        ),
    )
    if provider == "static" and not static_nodes:
        r.problems.append("static.nodes: provider is static but no node values are given")
    exposed = exposure_problem(server, bind.enabled)
    if exposed is not None:
        r.problems.append(f"server.host: {exposed}")

    if r.problems:
        raise ConfigError(r.problems, source)
    return Settings(
        metrics=tuple(metrics),
        scheduler_names=frozenset(names),
        server=server,
        provider=provider,
        prometheus=prometheus,
        static_nodes=static_nodes,
        herd_guard=herd,
        bind=bind,
        kubernetes=kube,
        requeue=requeue,
        prioritize=PrioritizeSettings(max_hosts=max_hosts or None),
        explain=explain,
    )


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate a policy file. Environment: PROMETHEUS_URL, KUBECONFIG."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read {path}: {exc.strerror or exc}"], str(path)) from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from exc
    return parse_settings(raw, environ, source=str(path))


def _parse_server(r: _Reader, raw: Any) -> ServerSettings:
    p = "server"
    allowed = {"host", "port", "urlPrefix", "maxBodyBytes", "gracePeriod", "tls"}
    s = r.section(raw, p, allowed | {"metricsPort", "metricsHost"})
    t = r.section(s.get("tls"), f"{p}.tls", {"certFile", "keyFile", "clientCAFile"})
    tls = TLSSettings(
        cert_file=r.get(t, f"{p}.tls", "certFile", _string, None, "a file path"),
        key_file=r.get(t, f"{p}.tls", "keyFile", _string, None, "a file path"),
        client_ca_file=r.get(t, f"{p}.tls", "clientCAFile", _string, None, "a file path"),
    )
    if (tls.cert_file is None) != (tls.key_file is None):
        r.problems.append(f"{p}.tls: certFile and keyFile must be set together")
    if tls.client_ca_file is not None and tls.cert_file is None:
        r.problems.append(f"{p}.tls.clientCAFile: needs certFile and keyFile")
    d = ServerSettings()
    body = r.get(s, p, "maxBodyBytes", _non_negative_int, d.max_body_bytes, "a positive integer")
    server = ServerSettings(
        host=r.get(s, p, "host", _string, d.host, "a host name or address"),
        port=r.get(s, p, "port", _port, d.port, "a port number 0..65535"),
        url_prefix=r.get(s, p, "urlPrefix", _prefix, d.url_prefix, "a path like /scheduler"),
        max_body_bytes=max(body, 1),
        grace_period=r.get(s, p, "gracePeriod", _positive, d.grace_period, "seconds > 0"),
        tls=tls,
        metrics_port=r.get(s, p, "metricsPort", _port, None, "a port number 1..65535"),
        metrics_host=r.get(s, p, "metricsHost", _string, d.metrics_host, "a host name or address"),
    )
    if server.metrics_port is not None and server.metrics_port in (0, server.port):
        r.problems.append(f"{p}.metricsPort: must be a port of its own, not {server.metrics_port}")
    return server


def _parse_prometheus(r: _Reader, raw: Any, env: Mapping[str, str]) -> PrometheusSettings:
    p = "prometheus"
    allowed = {
        "url",
        "interval",
        "timeout",
        "maxBackoff",
        "nodeLabel",
        "headers",
        "bearerTokenFile",
        "basicAuth",
        "caFile",
        "insecureSkipVerify",
    }
    s = r.section(raw, p, allowed)
    d = PrometheusSettings()
    url = env.get("PROMETHEUS_URL") or r.get(s, p, "url", _string, d.url, "a URL")
    if not url.startswith(("http://", "https://")):
        r.problems.append(f"{p}.url: must start with http:// or https://, got {url!r}")
    basic = None
    b = r.section(s.get("basicAuth"), f"{p}.basicAuth", {"username", "passwordFile"})
    if b:
        user = r.get(b, f"{p}.basicAuth", "username", _string, "", "a string")
        pw = r.get(b, f"{p}.basicAuth", "passwordFile", _string, "", "a file path")
        if not user or not pw:
            r.problems.append(f"{p}.basicAuth: needs both username and passwordFile")
        basic = BasicAuth(user, pw)
    return PrometheusSettings(
        url=url.rstrip("/"),
        interval=r.get(s, p, "interval", _positive, d.interval, "seconds > 0"),
        timeout=r.get(s, p, "timeout", _positive, d.timeout, "seconds > 0"),
        max_backoff=r.get(s, p, "maxBackoff", _positive, d.max_backoff, "seconds > 0"),
        node_label=r.get(s, p, "nodeLabel", _string, d.node_label, "a label name"),
        headers=r.get(s, p, "headers", _string_map, {}, "a mapping of strings"),
        bearer_token_file=r.get(s, p, "bearerTokenFile", _string, None, "a file path"),
        basic_auth=basic,
        ca_file=r.get(s, p, "caFile", _string, None, "a file path"),
        insecure_skip_verify=r.get(s, p, "insecureSkipVerify", _boolean, False, "true or false"),
    )


def _parse_static(r: _Reader, raw: Any) -> dict[str, dict[str, float]]:
    s = r.section(raw, "static", {"nodes"})
    nodes = s.get("nodes") or {}
    if not isinstance(nodes, dict):
        r.problems.append("static.nodes: must be a mapping node -> {metric: value}")
        return {}
    out: dict[str, dict[str, float]] = {}
    for node, values in nodes.items():
        if not isinstance(values, dict):
            r.problems.append(f"static.nodes.{node}: must be a mapping metric -> number")
            continue
        out[str(node)] = {}
        for metric in values:
            out[str(node)][str(metric)] = r.get(
                values, f"static.nodes.{node}", metric, _number, math.nan, "a number"
            )
    return out


_METRIC_KEYS = {
    "name",
    "query",
    "weight",
    "direction",
    "normalize",
    "min",
    "max",
    "filter",
    "onMissing",
    "maxAge",
}


def _parse_metrics(r: _Reader, raw: Any, provider: str) -> list[MetricSettings]:
    if raw is None:
        return [MetricSettings(name="cpu", query=DEFAULT_CPU_QUERY)]
    if not isinstance(raw, list) or not raw:
        r.problems.append("metrics: must be a non-empty list")
        return []
    out: list[MetricSettings] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        p = f"metrics[{i}]"
        s = r.section(item, p, _METRIC_KEYS)
        name = r.get(s, p, "name", _string, "", "a name")
        if not _METRIC_NAME.match(name):
            r.problems.append(f"{p}.name: must match [a-z][a-z0-9_]*, got {s.get('name')!r}")
        elif name in seen:
            r.problems.append(f"{p}.name: duplicate metric name {name!r}")
        seen.add(name)
        p = f"metrics[{i}]({name})" if name else p
        query = r.get(s, p, "query", _string, "", "a PromQL string")
        if provider == "prometheus" and not query.strip():
            r.problems.append(f"{p}.query: required when provider is prometheus")
        lo = r.get(s, p, "min", _number, 0.0, "a number")
        hi = r.get(s, p, "max", _number, 1.0, "a number")
        if hi <= lo:
            r.problems.append(f"{p}: max ({hi}) must be greater than min ({lo})")
        f = r.section(s.get("filter"), f"{p}.filter", {"above", "below"})
        threshold = None
        if f:
            threshold = FilterThreshold(
                above=r.get(f, f"{p}.filter", "above", _number, None, "a number"),
                below=r.get(f, f"{p}.filter", "below", _number, None, "a number"),
            )
            above, below = threshold.above, threshold.below
            if above is not None and below is not None and above < below:
                r.problems.append(
                    f"{p}.filter: above ({above}) is less than below ({below}): every value "
                    "is above one or below the other, so every node would be filtered"
                )
        out.append(
            MetricSettings(
                name=name,
                query=query,
                weight=r.get(s, p, "weight", _positive, 1.0, "a number > 0"),
                direction=r.get(
                    s, p, "direction", _choice("lower", "higher"), "lower", "lower or higher"
                ),
                normalize=r.get(
                    s,
                    p,
                    "normalize",
                    _choice("range", "candidates"),
                    "range",
                    "range or candidates",
                ),
                min=lo,
                max=hi,
                filter=threshold,
                on_missing=r.get(
                    s,
                    p,
                    "onMissing",
                    _choice("fail-open", "fail-closed"),
                    "fail-open",
                    "fail-open or fail-closed",
                ),
                max_age=r.get(s, p, "maxAge", _positive, 60.0, "seconds > 0"),
            )
        )
    return out


def _parse_herd(r: _Reader, raw: Any, metrics: list[MetricSettings]) -> HerdGuardSettings:
    p = "herdGuard"
    s = r.section(raw, p, {"enabled", "metric", "defaultCpuRequest", "defaultNodeCores", "settle"})
    d = HerdGuardSettings()
    herd = HerdGuardSettings(
        enabled=r.get(s, p, "enabled", _boolean, d.enabled, "true or false"),
        metric=r.get(s, p, "metric", _string, d.metric, "a metric name"),
        default_cpu_request=r.get(
            s, p, "defaultCpuRequest", _positive, d.default_cpu_request, "cores > 0"
        ),
        default_node_cores=r.get(
            s, p, "defaultNodeCores", _positive, d.default_node_cores, "cores > 0"
        ),
        settle=r.get(s, p, "settle", _number, d.settle, "seconds >= 0"),
    )
    names = {m.name for m in metrics}
    if herd.enabled and metrics and herd.metric not in names:
        if "metric" in s:
            r.problems.append(
                f"{p}.metric: {herd.metric!r} is not one of the metrics {sorted(names)}"
            )
        else:  # the default names a metric this policy does not have: guard nothing
            herd = HerdGuardSettings(enabled=False)
    return herd


def _parse_bind(r: _Reader, raw: Any) -> BindSettings:
    p = "bind"
    s = r.section(raw, p, {"enabled", "foreignPods", "timeout", "retries"})
    d = BindSettings()
    return BindSettings(
        enabled=r.get(s, p, "enabled", _boolean, d.enabled, "true or false"),
        foreign_pods=r.get(
            s, p, "foreignPods", _choice("refuse", "bind"), d.foreign_pods, "refuse or bind"
        ),
        timeout=r.get(s, p, "timeout", _positive, d.timeout, "seconds > 0"),
        retries=r.get(s, p, "retries", _non_negative_int, d.retries, "an integer >= 0"),
    )


def _parse_kubernetes(r: _Reader, raw: Any, env: Mapping[str, str]) -> KubernetesSettings:
    p = "kubernetes"
    s = r.section(raw, p, {"kubeconfig", "watchPods", "watchTimeout", "nodeRefresh"})
    d = KubernetesSettings()
    return KubernetesSettings(
        kubeconfig=env.get("KUBECONFIG") or r.get(s, p, "kubeconfig", _string, None, "a path"),
        watch_pods=r.get(s, p, "watchPods", _boolean, d.watch_pods, "true or false"),
        watch_timeout=max(
            1,
            r.get(s, p, "watchTimeout", _non_negative_int, d.watch_timeout, "seconds, an integer"),
        ),
        node_refresh=r.get(s, p, "nodeRefresh", _positive, d.node_refresh, "seconds > 0"),
    )


def _parse_requeue(r: _Reader, raw: Any) -> RequeueSettings:
    p = "requeue"
    s = r.section(raw, p, {"enabled", "patchesPerSecond", "keepSeconds", "maxPods"})
    d = RequeueSettings()
    return RequeueSettings(
        enabled=r.get(s, p, "enabled", _boolean, d.enabled, "true or false"),
        patches_per_second=r.get(
            s, p, "patchesPerSecond", _positive, d.patches_per_second, "a number > 0"
        ),
        keep_seconds=r.get(s, p, "keepSeconds", _positive, d.keep_seconds, "seconds > 0"),
        max_pods=max(
            1, r.get(s, p, "maxPods", _non_negative_int, d.max_pods, "a positive integer")
        ),
    )
