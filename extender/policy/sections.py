"""The service's sections of the policy file: listeners, Prometheus, the Kubernetes client,
bind, the herd guard, requeue, the rebalancer, prioritize and explain."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, Strict, StrictBool, StrictStr, field_validator, model_validator

from extender.policy.fields import (
    Count,
    Estimate,
    ForeignPods,
    MetricName,
    Model,
    NonEmpty,
    NonNegative,
    Number,
    OverloadMode,
    Port,
    Positive,
    RebalanceMode,
    Seconds,
    SelectorOperator,
    Share,
    TaintEffect,
)
from extender.policy.policies import DEFAULT_POD_USAGE_QUERY, DEFAULT_WORKLOAD_USAGE_QUERY

RETRY_BACKOFF = 0.2
"""Seconds before the first retry of a Kubernetes call; doubled for each next one."""


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
    """Listen address of the verbs: loopback, as the scheduler runs beside us in the pod
    (beyond loopback only with mutual TLS while bind is on)."""
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
    """A second listener for /metrics, /healthz and /readyz on the pod IP while the verbs
    stay on `host`; unset: those are served beside the verbs."""
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


def exposure_problem(server: ServerSettings, bind_enabled: bool) -> str | None:
    """Why these verbs must not listen where they would, or None: /bind must never be
    reachable from outside the pod unless clients must show a certificate (mutual TLS)."""
    try:
        loopback = ipaddress.ip_address(server.host.strip("[]")).is_loopback
    except ValueError:
        loopback = server.host == "localhost"
    if not bind_enabled or loopback or server.tls.client_ca_file is not None:
        return None
    return (
        f"{server.host!r} would let anyone who reaches this pod bind pods (/bind); keep "
        "the verbs on 127.0.0.1 and serve Prometheus and probes with server.metricsPort, "
        "or require client certificates (server.tls.clientCAFile)"
    )


class StaticSettings(Model):
    nodes: dict[StrictStr, dict[StrictStr, Number]] = {}  # noqa: RUF012 (pydantic copies defaults)
    """node -> {metric: value}: fixed values for demos and tests (provider: static)."""


class HerdGuardSettings(Model):
    enabled: StrictBool = True
    """Count a placed pod on its node until the node metric shows it."""
    metric: MetricName = "cpu"
    """The metric a placed pod's expected CPU use is added to (herdMetric overrides)."""
    default_cpu_request: Positive = 0.1
    """Cores counted for a pod without a CPU request (and nothing better known)."""
    default_node_cores: Positive = 4.0
    """Node size where nothing watches nodes (no Kubernetes API); with a node watch, a node
    not yet known vetoes nothing on its size instead."""
    settle: NonNegative = 45.0
    """Seconds after a bind before the node metric can show any of the pod (scrape, rule
    evaluation and our refresh, at worst): the reservation is whole until then, then fades
    over the metric's rate window."""
    window: Seconds | None = None
    """The herd metric's rate window in seconds; unset: read from its query (a rate's range,
    or a rule's `:rate5m` suffix), as `check-config` shows."""
    fit: StrictBool = True
    """A node the pod's expected use would push past the herd metric's filter.above is
    turned away for this pod (unresolvable: preemption would not help)."""
    wait_for_room: NonNegative = 1800.0
    """Seconds a pod that fits on no node waits for room (requeued when a node has some);
    then it goes to the roomiest; 0: at once. The default is the simulation's (BENCHMARKS.md)."""
    spare_room: Share = 0.2
    """A pod too big for every node's headroom waits only in a full cluster: while the
    nodes' headroom adds up to at least this share of the cluster's cores, it goes at once
    to the node with the most that it leaves under 100 % (the room is there, spread thin);
    1: it always waits. The default is the simulation's (BENCHMARKS.md)."""
    peak_sigmas: NonNegative = 2.0
    """A node is judged by its predicted peak: the herd metric plus this many times how far
    its spread (standard deviation over peakWindow) is above the typical node's, so a node
    that swings more gets less headroom; 0: by its latest value."""
    peak_window: Positive = 600.0
    """Seconds the spread of a node's value is measured over (exponentially weighted)."""
    estimate: Estimate = "usage"
    """usage: a placed pod counts at its workload's measured use (the quantile below), or
    its own once measured; request: at its CPU request."""
    quantile: Share = 0.9
    """Which quantile of a workload's running pods' CPU use a new pod of it is counted at."""
    min_pods: Count = 3
    """Running pods a workload needs measured before its quantile is trusted; with fewer,
    a pod is counted at its request x requestFactor."""
    request_factor: Positive = 1.0
    """A pod without a trusted workload estimate counts its CPU request times this."""
    usage_query: StrictStr = DEFAULT_WORKLOAD_USAGE_QUERY
    """PromQL: per workload (labels namespace, workload, workload_type) its running pods'
    CPU use as `stat="quantile"` (`{quantile}` filled in), `stat="median"` (optional) and
    `stat="pods"` (their count); the default reads kube-prometheus-stack's rules."""
    pod_usage_query: StrictStr = DEFAULT_POD_USAGE_QUERY
    """PromQL: per young pod (labels namespace, pod) its own CPU use now, in cores (the
    default: kube-prometheus-stack's `sum_irate` rule and kube_pod_created)."""
    max_workloads: Count = 100_000
    """Workloads (and young pods) kept from one answer at most: memory stays bounded."""
    usage_interval: Seconds = 60.0
    """Seconds between fetches of the measured use (it moves slowly; the queries are heavy)."""
    usage_timeout: Seconds = 30.0
    """Seconds each usage query may take: longer than prometheus.timeout, as it joins
    every running pod to its workload."""
    usage_max_age: Seconds = 600.0
    """Measured use older than this is not used: pods count at request x requestFactor."""


class BindSettings(Model):
    enabled: StrictBool = True
    """Answer /bind (bindVerb). Off, the scheduler binds: while pods we let go are not seen
    bound, the filter passes the next pod only our best node."""
    foreign_pods: ForeignPods = "refuse"
    """A bind for a pod whose schedulerName is not ours: refuse (an Error naming the fix)
    or bind it."""
    timeout: Seconds = 1.5
    """Seconds per Kubernetes API call; timeout x (retries + 1) + back-off stays under the
    scheduler's 5 s httpTimeout, so our Error arrives first."""
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
    """Watch every pod: the herd guard counts pods whoever placed them, and turned-away pods
    can be requeued (RBAC: list and watch pods)."""
    watch_timeout: Count = 300
    """Seconds one watch request stays open before the API server ends it and we resume."""
    node_refresh: Seconds = 60.0
    """Deprecated and ignored: nodes are watched (kept so older policy files still load)."""


class RequeueSettings(Model):
    enabled: StrictBool = True
    """Patch a pod our filter turned away everywhere once a node passes, so kube-scheduler
    retries it now, not after 5 minutes (needs watchPods; RBAC: patch pods)."""
    patches_per_second: Positive = 5.0
    """Annotation patches (decice.io/metrics-recovered) at most this fast."""
    keep_seconds: Seconds = 600.0
    """Seconds a turned-away pod is remembered (the scheduler retries it after 5 minutes)."""
    max_pods: Count = 10_000
    """Turned-away pods remembered at most (oldest dropped)."""


class RebalanceSettings(Model):
    """`decice-extender rebalance`: evict running pods from nodes the policy now rejects or
    scores clearly worse (their controllers recreate them, and we place the successors)."""

    mode: RebalanceMode = "dry-run"
    """dry-run: log, post an Event and count what would move; evict: act (as the shipped
    config and the chart do)."""
    interval: Seconds = 15.0
    """Seconds between re-checks of our running pods (with sustain 2 a pod moves about 30 s
    after its node's value is over)."""
    margin: Annotated[int, Strict(), Field(ge=1, le=10)] = 10
    """Score points (0..10) the best node must beat the pod's node by for the pod to be a
    candidate to move; 10: only pods on a node the filter rejects move."""
    sustain: Count = 2
    """Consecutive checks a pod must be a candidate before it moves."""
    min_age: NonNegative = 60.0
    """Seconds a pod is left where it is after it starts (until a 1-minute rate shows it)."""
    max_evictions_per_cycle: Count = 5
    """Evictions (or, in dry-run, would-be evictions) per check, in the whole cluster."""
    max_evictions_per_node: Count = 1
    """Evictions per check from one node."""
    lease_name: NonEmpty = "decice-rebalancer"
    """The coordination.k8s.io/v1 Lease that elects the one active rebalancer."""
    lease_namespace: StrictStr | None = None
    """Namespace of the Lease; unset: POD_NAMESPACE, else the service account's, else
    "default"."""
    lease_duration: Annotated[int, Strict(), Field(ge=2)] = 15
    """Seconds a Lease holds without renewal before another replica may take it."""
    renew_deadline: Annotated[int, Strict(), Field(ge=2)] = 10
    """Seconds the leader keeps trying to renew before it stops evicting."""
    retry_period: Count = 2
    """Seconds between attempts to acquire or renew the Lease."""

    @model_validator(mode="after")
    def _lease_times(self) -> RebalanceSettings:
        # client-go's rules (tools/leaderelection/leaderelection.go, NewLeaderElector).
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError("renewDeadline must be greater than 1.2 x retryPeriod")
        return self


class SelectorRequirement(Model):
    key: NonEmpty
    """The label key."""
    operator: SelectorOperator
    """How the label's value is compared with `values`."""
    values: tuple[StrictStr, ...] = ()
    """The values of In and NotIn."""


class LabelSelectorSettings(Model):
    match_labels: dict[StrictStr, StrictStr] = {}  # noqa: RUF012 (pydantic copies defaults)
    """Labels a pod must carry, each with this value."""
    match_expressions: tuple[SelectorRequirement, ...] = ()
    """Requirements on a pod's labels, all of which must hold."""


class ShadowSettings(Model):
    """`decice-extender shadow`: judge other schedulers' placements by our scores,
    changing nothing."""

    scheduler_names: tuple[NonEmpty, ...] = ()
    """Judge pods of these spec.schedulerName values; empty: every scheduler's."""
    namespaces: tuple[NonEmpty, ...] = ()
    """Judge pods of these namespaces; empty: every namespace."""
    label_selector: LabelSelectorSettings | None = None
    """Judge only pods whose labels this selector matches (matchLabels, matchExpressions)."""
    keep: Count = 10_000
    """Assignments kept for the summary (the last ones), and placements watched for
    exceedance at once."""
    exceedance_window: Seconds = 300.0
    """Seconds after a placement in which its node going over the policy's filter.above
    (the herd metric's, else the first metric's) counts as an exceedance."""


class OverloadSettings(Model):
    """Overload taints: a node that stays above a metric's filter threshold carries
    `decice.io/overloaded=<metric>`, which cluster autoscalers read (never extenders)."""

    enabled: StrictBool = False
    """Taint nodes that stay hot (RBAC: patch nodes; create events; its Lease)."""
    mode: OverloadMode = "taint"
    """taint: write the taints; dry-run: log and count what it would taint, change nothing."""
    effect: TaintEffect = "NoSchedule"
    """NoSchedule (autoscalers see it) or PreferNoSchedule (soft; autoscalers ignore it)."""
    metrics: tuple[MetricName, ...] = ()
    """Metrics of the default policy that taint, each at its filter.above; empty: every
    metric of the default policy that has filter.above."""
    for_seconds: Seconds = 120.0
    """Seconds a node must stay above (tainted) or below threshold - hysteresis (untainted)."""
    hysteresis: NonNegative = 0.05
    """Below threshold - hysteresis counts as cool: a node near the threshold does not flap."""
    max_tainted_fraction: Share = 0.3
    """At most this share of the nodes are tainted (the hottest): a wrong query never
    cordons the cluster."""
    patches_per_second: Positive = 2.0
    """Node patches at most this fast."""
    remove_on_shutdown: StrictBool = True
    """On a graceful stop, the writer removes its taints (a successor puts them back)."""
    lease_name: NonEmpty = "decice-overload"
    """The Lease that elects the one replica that writes taints."""
    lease_namespace: StrictStr | None = None
    """Namespace of the Lease; unset: POD_NAMESPACE, then the service account's."""


class ShortlistSettings(Model):
    nodes: Count = 200
    """The filter passes at least this many of our best nodes (all when fewer pass)."""
    share: Share = 0.2
    """Or this share of the nodes that pass, when that is more."""


class PrioritizeSettings(Model):
    max_hosts: Count | None = None
    """Answer only the best K nodes; the scheduler scores the others 0."""
    shortlist: ShortlistSettings | None = ShortlistSettings()
    """The filter passes only our best nodes, for the scheduler to score; null: all of them."""


class ExplainSettings(Model):
    node_metrics: StrictBool = True
    """Export each node's score and metric values in /metrics (decice_node_score,
    decice_node_metric): a series per node and metric."""
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
