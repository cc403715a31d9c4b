"""Typed, frozen settings: the policy YAML plus environment overrides, validated once.

The models below are the one source of the policy format: `load_settings` validates a
file against them (every problem listed at once, by its key path), and
docs/configuration.md's reference and the chart's `values.schema.json` policy block are
generated from them (extender/reference.py). Keys are camelCase in YAML, snake_case in
Python. This module does no I/O except reading the file it is given.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

Direction = Literal["lower", "higher"]
Normalize = Literal["range", "candidates"]
MissingPolicy = Literal["fail-open", "fail-closed"]
ForeignPods = Literal["refuse", "bind"]
ProviderKind = Literal["prometheus", "static"]

Number = Annotated[float, Strict()]
"""A YAML number: an int or a float, never a string or a bool; finite (allow_inf_nan)."""
Positive = Annotated[float, Strict(), Field(gt=0)]
Seconds = Annotated[float, Strict(), Field(gt=0)]
Count = Annotated[int, Strict(), Field(ge=1)]
Port = Annotated[int, Strict(), Field(ge=0, le=65535)]
MetricName = Annotated[str, Strict(), Field(pattern=r"^[a-z][a-z0-9_]*$")]
PolicyName = Annotated[
    str, Strict(), Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
]

DEFAULT_CPU_QUERY = """max by (node) (
  instance:node_cpu_utilisation:rate5m{job="node-exporter"}
  * on (namespace, pod) group_left (node)
    topk by (namespace, pod) (1, node_namespace_pod:kube_pod_info:)
)"""

DEFAULT_SCHEDULER_NAME = "decice_sched"
"""The scheduler profile whose pods are ours when `schedulerNames` is not set."""

DEFAULT_POLICY = "default"
"""The name a single-policy file's top-level `metrics` get."""

RETRY_BACKOFF = 0.2
"""Seconds before the first retry of a Kubernetes call; doubled for each next one."""


class ConfigError(ValueError):
    """The policy is invalid; `problems` lists every bad key with what is wrong."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


class Model(BaseModel):
    """The base of every section: unknown keys are errors, values never change after load."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
    )


class TLSSettings(Model):
    cert_file: StrictStr | None = None
    """Server certificate (PEM). TLS is on when certFile and keyFile are set."""
    key_file: StrictStr | None = None
    """Private key of certFile (PEM)."""
    client_ca_file: StrictStr | None = Field(default=None, alias="clientCAFile")
    """CA bundle for client certificates; set it to require mutual TLS."""

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None

    @model_validator(mode="after")
    def _pairs(self) -> TLSSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("certFile and keyFile must be set together")
        if self.client_ca_file is not None and self.cert_file is None:
            raise ValueError("clientCAFile needs certFile and keyFile")
        return self


class ServerSettings(Model):
    host: StrictStr = "127.0.0.1"
    """Listen address of the verbs. Loopback by default: the scheduler runs beside us in
    the pod; beyond loopback only with mutual TLS while bind is on."""
    port: Port = 8888
    """Listen port of the verbs."""
    url_prefix: StrictStr = Field(default="", json_schema_extra={"pattern": "^(/.*)?$"})
    """Path prefix: "/scheduler" serves /scheduler/filter and so on."""
    max_body_bytes: Count = 32 * 1024 * 1024
    """Bodies larger than this get 413 (5,000 full Nodes are about 25 MB)."""
    grace_period: Seconds = 10.0
    """Seconds to finish in-flight requests on SIGTERM."""
    tls: TLSSettings = TLSSettings()
    """Optional TLS for the verbs; with clientCAFile, mutual TLS."""
    metrics_port: Port | None = None
    """A second listener serving only /metrics, /healthz and /readyz, for Prometheus and
    kubelet probes on the pod IP, while the verbs stay on `host` (loopback). Unset: those
    paths are served beside the verbs."""
    metrics_host: StrictStr = "0.0.0.0"
    """Listen address of the metrics listener."""

    @field_validator("url_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        text = value.rstrip("/")
        if text and not text.startswith("/"):
            raise ValueError("must be a path like /scheduler (starting with '/')")
        return text

    @model_validator(mode="after")
    def _own_port(self) -> ServerSettings:
        if self.metrics_port is not None and self.metrics_port in (0, self.port):
            raise ValueError(f"metricsPort must be a port of its own, not {self.metrics_port}")
        return self

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


class BasicAuth(Model):
    username: Annotated[str, Strict(), Field(min_length=1)]
    """User name sent with HTTP basic auth."""
    password_file: Annotated[str, Strict(), Field(min_length=1)]
    """File holding the password (re-read each refresh)."""


class PrometheusSettings(Model):
    url: StrictStr = Field(
        default="http://prometheus-operated.monitoring.svc:9090",
        json_schema_extra={"pattern": "^https?://"},
    )
    """Prometheus base URL; PROMETHEUS_URL overrides it."""
    interval: Seconds = 15.0
    """Seconds between refreshes."""
    timeout: Seconds = 5.0
    """Per-query timeout in seconds."""
    max_backoff: Seconds = 120.0
    """Ceiling of the refresh back-off after consecutive errors."""
    node_label: Annotated[str, Strict(), Field(min_length=1)] = "node"
    """Label naming the node: node, nodename, instance or any label; `instance`
    addresses are mapped to nodes through their InternalIP."""
    headers: dict[StrictStr, StrictStr] = {}
    """Extra HTTP headers sent with every query."""
    bearer_token_file: StrictStr | None = None
    """Sent as "Authorization: Bearer <token>", re-read each refresh (projected tokens rotate)."""
    basic_auth: BasicAuth | None = None
    """HTTP basic auth: {username, passwordFile}."""
    ca_file: StrictStr | None = Field(default=None, alias="caFile")
    """CA bundle for https."""
    insecure_skip_verify: StrictBool = False
    """Do not verify the server certificate (tests only)."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")


class StaticSettings(Model):
    nodes: dict[StrictStr, dict[StrictStr, Number]] = {}
    """node -> {metric: value}: fixed values for demos and tests (provider: static)."""


class FilterThreshold(Model):
    above: Number | None = None
    """A node whose value is greater than this is filtered."""
    below: Number | None = None
    """A node whose value is less than this is filtered."""

    @model_validator(mode="after")
    def _not_everything(self) -> FilterThreshold:
        if self.above is not None and self.below is not None and self.above < self.below:
            raise ValueError(
                f"above ({self.above:g}) is less than below ({self.below:g}): every value "
                "is above one or below the other, so every node would be filtered"
            )
        return self


class MetricSettings(Model):
    name: MetricName
    """Unique within its policy; [a-z][a-z0-9_]*. The same name in two policies must
    fetch the same query (it is fetched once)."""
    query: StrictStr = ""
    """PromQL returning one value per node; required for provider: prometheus."""
    weight: Positive = 1.0
    """Share of this metric in the node's score."""
    direction: Direction = "lower"
    """Which values are better: lower or higher."""
    normalize: Normalize = "range"
    """range: fixed min..max; candidates: rescaled over the request's own nodes."""
    min: Number = 0.0
    """Value that scores as worst (lower) or best (higher); clamped."""
    max: Number = 1.0
    """The other end of the range."""
    filter: FilterThreshold | None = None
    """Thresholds; a node outside them is filtered."""
    on_missing: MissingPolicy = "fail-open"
    """fail-open: a node without usable data gets a neutral score and is never filtered;
    fail-closed: it is filtered."""
    max_age: Seconds = 60.0
    """Data older than this many seconds (since its last good fetch) counts as missing."""

    @model_validator(mode="after")
    def _range(self) -> MetricSettings:
        if self.max <= self.min:
            raise ValueError(f"max ({self.max:g}) must be greater than min ({self.min:g})")
        return self


DEFAULT_METRICS = (MetricSettings(name="cpu", query=DEFAULT_CPU_QUERY),)


class PolicySettings(Model):
    metrics: tuple[MetricSettings, ...] = Field(json_schema_extra={"minItems": 1})
    """The metrics this policy filters and scores by (at least one)."""
    herd_metric: MetricName | None = None
    """The metric the herd guard adds a placed pod's CPU request to. Unset: herdGuard.metric
    when this policy has that metric, else no herd guard for this policy."""
    description: StrictStr = ""
    """What the policy is for (shown by doctor and /explain)."""

    @field_validator("metrics")
    @classmethod
    def _checked(cls, metrics: tuple[MetricSettings, ...]) -> tuple[MetricSettings, ...]:
        return checked_metrics(metrics)


def checked_metrics(metrics: tuple[MetricSettings, ...]) -> tuple[MetricSettings, ...]:
    """A policy's metrics: at least one, each name once."""
    if not metrics:
        raise ValueError("must list at least one metric (a policy with no metrics scores nothing)")
    names = [m.name for m in metrics]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"duplicate metric name(s) {', '.join(map(repr, twice))}")
    return metrics


class HerdGuardSettings(Model):
    enabled: StrictBool = True
    """Count a placed pod on its node until fresh metrics include it."""
    metric: MetricName = "cpu"
    """The metric the pod's CPU request is added to (a policy's herdMetric overrides)."""
    default_cpu_request: Positive = 0.1
    """Cores counted for a pod without a CPU request."""
    default_node_cores: Positive = 4.0
    """Node size used when the node's allocatable CPU is unknown."""
    settle: Annotated[float, Strict(), Field(ge=0)] = 30.0
    """Seconds after a bind before a newer snapshot may replace the pod's reservation."""


class BindSettings(Model):
    enabled: StrictBool = True
    """Answer /bind (set bindVerb in the scheduler config)."""
    foreign_pods: ForeignPods = "refuse"
    """A bind for a pod whose schedulerName is not ours: refuse (an Error naming the fix)
    or bind it."""
    timeout: Seconds = 1.5
    """Per Kubernetes API call. timeout x (retries + 1) + back-off stays under the
    scheduler's default 5 s httpTimeout, so our Error arrives before its timeout."""
    retries: Annotated[int, Strict(), Field(ge=0)] = 1
    """Retries for 429, 5xx, timeouts and connection errors."""

    @property
    def budget(self) -> float:
        """Seconds one bind may take at worst: every attempt timing out, plus the back-off
        between them (RETRY_BACKOFF, doubling)."""
        return self.timeout * (self.retries + 1) + RETRY_BACKOFF * ((1 << self.retries) - 1)


class KubernetesSettings(Model):
    kubeconfig: StrictStr | None = None
    """KUBECONFIG overrides; unset means in-cluster, then ~/.kube/config."""
    watch_pods: StrictBool = True
    """Watch every pod: the herd guard then counts pods whichever binder placed them, and
    turned-away pods can be requeued (RBAC: list and watch pods)."""
    watch_timeout: Count = 300
    """Seconds one watch request stays open before the API server ends it and we resume."""
    node_refresh: Seconds = 60.0
    """Deprecated and ignored: nodes are watched (kept so older policy files still load)."""


class RequeueSettings(Model):
    enabled: StrictBool = True
    """Patch a pod our filter turned away from every node once metrics pass one of them,
    so kube-scheduler retries it now rather than after its 5-minute unschedulable wait
    (needs watchPods; RBAC: patch pods)."""
    patches_per_second: Positive = 5.0
    """Annotation patches (decice.io/metrics-recovered) at most this fast."""
    keep_seconds: Seconds = 600.0
    """Turned-away pods are forgotten after this long (the scheduler retries them itself
    after 5 minutes, and our filter remembers them again if it still turns them away)."""
    max_pods: Count = 10_000
    """Turned-away pods remembered at most (oldest dropped)."""


RebalanceMode = Literal["dry-run", "evict"]


class RebalanceSettings(Model):
    """`decice-extender rebalance`: move running pods off nodes the policy now rejects or
    scores clearly worse, through the Eviction API (their controllers recreate them, and
    the scheduler places the successors with the same policy)."""

    mode: RebalanceMode = "dry-run"
    """dry-run: log, post an Event and count what would move, evict nothing; evict: act."""
    interval: Seconds = 60.0
    """Seconds between re-checks of every running pod of ours."""
    margin: Annotated[int, Strict(), Field(ge=1, le=10)] = 3
    """Score points (0..10) the best node must beat the pod's node by before the pod is a
    candidate to move (stickiness: equal or near-equal nodes never cause a move)."""
    sustain: Count = 3
    """Consecutive checks a pod must be a candidate before it moves (one bad sample never
    moves a pod)."""
    min_age: Annotated[float, Strict(), Field(ge=0)] = 600.0
    """Pods younger than this many seconds are left where they are."""
    max_evictions_per_cycle: Count = 5
    """Evictions (or, in dry-run, would-be evictions) per check, in the whole cluster."""
    max_evictions_per_node: Count = 1
    """Evictions per check from one node."""
    lease_name: Annotated[str, Strict(), Field(min_length=1)] = "decice-rebalancer"
    """The coordination.k8s.io/v1 Lease that elects the one active rebalancer."""
    lease_namespace: StrictStr | None = None
    """The Lease's namespace; unset: POD_NAMESPACE, else the service account's namespace,
    else "default"."""
    lease_duration: Annotated[int, Strict(), Field(ge=2)] = 15
    """Seconds a Lease holds without renewal before another replica may take it."""
    renew_deadline: Annotated[int, Strict(), Field(ge=2)] = 10
    """Seconds the leader keeps trying to renew before it stops evicting."""
    retry_period: Count = 2
    """Seconds between attempts to acquire or renew the Lease."""

    @model_validator(mode="after")
    def _lease_times(self) -> RebalanceSettings:
        # kubernetes.leaderelection's own rules (it would sys.exit on them).
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError("renewDeadline must be greater than 1.2 x retryPeriod")
        return self


class PrioritizeSettings(Model):
    max_hosts: Count | None = None
    """Answer only the best K nodes; the scheduler scores the others 0."""


class ExplainSettings(Model):
    node_metrics: StrictBool = True
    """Export each node's score and metric values in /metrics (decice_node_score,
    decice_node_metric): one series per node and metric, so off for clusters that do not
    want thousands of series."""
    keep_pods: Count = 10_000
    """Pods whose last decision is kept (for the bind guard and /explain)."""
    max_nodes: Count = 100
    """Nodes listed in one /explain answer (best first; the chosen node always)."""
    events: StrictBool = True
    """Post an Event on every pod we bind (RBAC: create events.k8s.io events)."""
    events_per_second: Positive = 5.0
    """At most this many Events a second; the rest wait in the queue."""
    event_queue: Count = 100
    """Events waiting beyond this are dropped (counted in decice_events_total)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One policy as the engine uses it: its metrics and the herd guard's, resolved."""

    name: str
    metrics: tuple[MetricSettings, ...]
    herd_metric: str | None
    """The metric placed pods add load to; None: this policy has no herd guard."""
    description: str = ""

    @property
    def filters_anything(self) -> bool:
        """True when some node can be filtered: a threshold or a fail-closed metric."""
        return any(m.filter is not None or m.on_missing == "fail-closed" for m in self.metrics)


class Settings(Model):
    """The whole policy file."""

    scheduler_names: Annotated[
        frozenset[Annotated[str, Strict(), Field(min_length=1)]], Field(min_length=1)
    ] = frozenset({DEFAULT_SCHEDULER_NAME})
    """Pods with another spec.schedulerName pass through untouched."""
    server: ServerSettings = ServerSettings()
    """The verbs listener and the optional metrics listener."""
    provider: ProviderKind = "prometheus"
    """Where metric values come from: prometheus, or static (demos, tests)."""
    prometheus: PrometheusSettings = PrometheusSettings()
    """Used when provider: prometheus."""
    static: StaticSettings = StaticSettings()
    """Used when provider: static."""
    single_metrics: tuple[MetricSettings, ...] | None = Field(
        default=None, alias="metrics", json_schema_extra={"minItems": 1}
    )
    """A single-policy file: the metrics of the one policy (named "default"). Unset and no
    `policies`: one metric, node CPU from a stock kube-prometheus-stack."""
    policies: dict[PolicyName, PolicySettings] | None = Field(
        default=None, json_schema_extra={"minProperties": 1}
    )
    """Named policies; a pod picks one with the annotation decice.io/policy: NAME.
    Exclusive with top-level `metrics`."""
    default_policy: PolicyName | None = None
    """The policy of pods without the annotation (required with more than one policy)."""
    herd_guard: HerdGuardSettings = HerdGuardSettings()
    """A placed pod counts on its node until fresh data shows it."""
    bind: BindSettings = BindSettings()
    """The bind verb."""
    kubernetes: KubernetesSettings = KubernetesSettings()
    """The Kubernetes API client and watches."""
    requeue: RequeueSettings = RequeueSettings()
    """Retry pods our filter turned away from every node, once metrics recover."""
    prioritize: PrioritizeSettings = PrioritizeSettings()
    """The prioritize verb."""
    explain: ExplainSettings = ExplainSettings()
    """/explain, Events and per-node series."""
    rebalance: RebalanceSettings = RebalanceSettings()
    """The rebalancer (`decice-extender rebalance`, its own Deployment)."""

    @field_validator("single_metrics")
    @classmethod
    def _some(cls, metrics: tuple[MetricSettings, ...] | None) -> tuple[MetricSettings, ...] | None:
        if metrics is not None:
            checked_metrics(metrics)
        return metrics

    _policies: dict[str, Policy] = PrivateAttr(default_factory=dict)
    _default: str = PrivateAttr(default=DEFAULT_POLICY)

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        problems = _policy_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        self._policies = _resolved(self)
        self._default = self.default_policy or next(iter(self._policies))
        return self

    # -- derived, once per load ------------------------------------------------------------

    @property
    def policy_map(self) -> Mapping[str, Policy]:
        """name -> Policy, in file order."""
        return self._policies

    @property
    def default(self) -> Policy:
        """The policy of pods that do not name one."""
        return self._policies[self._default]

    @property
    def fetched_metrics(self) -> tuple[MetricSettings, ...]:
        """Each metric to fetch, once, whichever policies use it (same name, same query)."""
        seen: dict[str, MetricSettings] = {}
        for policy in self._policies.values():
            for m in policy.metrics:
                seen.setdefault(m.name, m)
        return tuple(seen.values())

    @property
    def filters_anything(self) -> bool:
        """True when some policy can filter a node (the scheduler needs filterVerb)."""
        return any(p.filters_anything for p in self._policies.values())

    @property
    def herd_guarded(self) -> bool:
        """Some policy adds placed pods' load to a metric."""
        return any(p.herd_metric is not None for p in self._policies.values())

    def metric_paths(self) -> list[tuple[str, MetricSettings]]:
        """(key path as written in the file, metric) for every metric of every policy."""
        out: list[tuple[str, MetricSettings]] = []
        for name, policy in self._policies.items():
            base = f"policies.{name}." if self.policies is not None else ""
            out += [(f"{base}metrics[{i}]({m.name})", m) for i, m in enumerate(policy.metrics)]
        return out

    @property
    def static_nodes(self) -> Mapping[str, Mapping[str, float]]:
        return self.static.nodes


def _policy_problems(s: Settings) -> list[str]:
    """Cross-key problems of the policies section, each naming its key path."""
    problems: list[str] = []
    if s.single_metrics is not None and s.policies is not None:
        problems.append("metrics: give either top-level metrics (one policy) or policies, not both")
    if s.policies is not None:
        if not s.policies:
            problems.append("policies: must name at least one policy")
        elif s.default_policy is None and len(s.policies) > 1:
            problems.append(
                f"defaultPolicy: required with more than one policy (one of {sorted(s.policies)})"
            )
        elif s.default_policy is not None and s.default_policy not in s.policies:
            problems.append(
                f"defaultPolicy: {s.default_policy!r} is not one of the policies "
                f"{sorted(s.policies)}"
            )
    elif s.default_policy is not None and s.default_policy != DEFAULT_POLICY:
        problems.append(
            f"defaultPolicy: {s.default_policy!r} names no policy: a file without `policies` "
            f"has one policy, {DEFAULT_POLICY!r}"
        )
    queries: dict[str, tuple[str, str]] = {}
    for name, policy in _raw_policies(s).items():
        where = f"policies.{name}." if s.policies is not None else ""  # key paths as written
        names = {m.name for m in policy.metrics}
        if policy.herd_metric is not None and policy.herd_metric not in names:
            problems.append(
                f"{where}herdMetric: {policy.herd_metric!r} is not one of its metrics "
                f"{sorted(names)}"
            )
        for i, m in enumerate(policy.metrics):
            if s.provider == "prometheus" and not m.query.strip():
                problems.append(
                    f"{where}metrics[{i}]({m.name}).query: required when provider is prometheus"
                )
            first = queries.setdefault(m.name, (name, m.query))
            if first[1] != m.query:
                problems.append(
                    f"{where}metrics[{i}]({m.name}).query: differs from the query of "
                    f"{m.name!r} in policy {first[0]!r}; a metric name is fetched once, so give "
                    "one of them another name"
                )
    if (
        s.herd_guard.enabled
        and "metric" in s.herd_guard.model_fields_set
        and s.herd_guard.metric not in queries
    ):
        problems.append(
            f"herdGuard.metric: {s.herd_guard.metric!r} is not one of the metrics {sorted(queries)}"
        )
    if s.provider == "static" and not s.static.nodes:
        problems.append("static.nodes: provider is static but no node values are given")
    exposed = exposure_problem(s.server, s.bind.enabled)
    if exposed is not None:
        problems.append(f"server.host: {exposed}")
    return problems


def _raw_policies(s: Settings) -> dict[str, PolicySettings]:
    if s.policies is not None:
        return dict(s.policies)
    return {DEFAULT_POLICY: PolicySettings(metrics=s.single_metrics or DEFAULT_METRICS)}


def _resolved(s: Settings) -> dict[str, Policy]:
    out: dict[str, Policy] = {}
    for name, raw in _raw_policies(s).items():
        herd: str | None = None
        if s.herd_guard.enabled:
            names = {m.name for m in raw.metrics}
            herd = raw.herd_metric or (
                s.herd_guard.metric if s.herd_guard.metric in names else None
            )
        out[name] = Policy(name, raw.metrics, herd, raw.description)
    return out


# -- loading -----------------------------------------------------------------------------------


def parse_settings(
    raw: Any, environ: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Build Settings from parsed YAML; raise ConfigError naming every bad key."""
    if raw is None:
        raise ConfigError(["$: the file is empty"], source)
    if not isinstance(raw, dict):
        raise ConfigError([f"$: must be a mapping, got {type(raw).__name__}"], source)
    raw = _with_environment(raw, environ or {})
    try:
        return Settings.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc), source) from None


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate a policy file. Environment: PROMETHEUS_URL, KUBECONFIG."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read {path}: {exc.strerror or exc}"], str(path)) from exc
    return parse_text(text, environ, str(path))


def parse_text(
    text: str, environ: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Settings from the policy file's text (what a reload reads)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], source) from exc
    return parse_settings(raw, environ, source)


def _with_environment(raw: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """PROMETHEUS_URL and KUBECONFIG replace their keys (as in the original DECICE setup)."""
    raw = dict(raw)
    for section, key, var in (
        ("prometheus", "url", "PROMETHEUS_URL"),
        ("kubernetes", "kubeconfig", "KUBECONFIG"),
    ):
        value = env.get(var)
        if not value:
            continue
        current = raw.get(section)
        raw[section] = {**(current if isinstance(current, dict) else {}), key: value}
    return raw


def describe_errors(exc: ValidationError) -> list[str]:
    """One line per problem: `path: what is wrong (got value)`, paths as written in YAML."""
    out: list[str] = []
    for error in exc.errors(include_url=False):
        path = _path(error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            key = str(error["loc"][-1])
            hint = difflib.get_close_matches(key, _KNOWN_KEYS, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            out.append(f"{path}: unknown key{suggestion}")
            continue
        message = str(error["msg"])
        if kind == "value_error":
            message = message.removeprefix("Value error, ")
            if error["loc"] == ():
                out.extend(message.split("\n"))  # _policy_problems: each names its path
                continue
        elif kind == "missing":
            out.append(f"{path}: required")
            continue
        shown = repr(error["input"])
        got = "" if kind in ("value_error",) else f" (got {shown[:80]})"
        out.append(f"{path}: {message}{got}")
    return out


def _path(loc: tuple[int | str, ...]) -> str:
    path = "$"
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif "[" in part or part in ("function-after", "function-before"):
            continue  # pydantic's names for union members and validators, not keys
        else:
            path = part if path == "$" else f"{path}.{part}"
    return path


def _aliases(model: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


_KNOWN_KEYS = sorted(
    set().union(
        *(
            _aliases(m)
            for m in (
                Settings,
                ServerSettings,
                TLSSettings,
                PrometheusSettings,
                BasicAuth,
                StaticSettings,
                MetricSettings,
                FilterThreshold,
                PolicySettings,
                HerdGuardSettings,
                BindSettings,
                KubernetesSettings,
                RequeueSettings,
                PrioritizeSettings,
                ExplainSettings,
                RebalanceSettings,
            )
        )
    )
)
"""Every key of the format, to suggest the one a typo meant."""
