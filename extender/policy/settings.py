"""The whole policy file as one frozen `Settings`, with the problems that span keys. The
models are the one source of the format (extender.policy.reference generates its docs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, PrivateAttr, model_validator

from extender.policy.backend import PrometheusSettings
from extender.policy.fields import Model, NonEmpty, PolicyName, ProviderKind
from extender.policy.policies import (
    DEFAULT_METRICS,
    Metrics,
    MetricSettings,
    Policy,
    PolicySettings,
)
from extender.policy.sections import (
    BindSettings,
    ExplainSettings,
    HerdGuardSettings,
    KubernetesSettings,
    OverloadSettings,
    PrioritizeSettings,
    RebalanceSettings,
    RequeueSettings,
    ServerSettings,
    ShadowSettings,
    StaticSettings,
    exposure_problem,
)

DEFAULT_SCHEDULER_NAME = "decice_sched"
"""The scheduler profile whose pods are ours when `schedulerNames` is not set."""

DEFAULT_POLICY = "default"
"""The name a single-policy file's top-level `metrics` get."""


class Settings(Model):
    """The whole policy file."""

    scheduler_names: Annotated[frozenset[NonEmpty], Field(min_length=1)] = frozenset(
        {DEFAULT_SCHEDULER_NAME}
    )
    """Pods with another spec.schedulerName pass through untouched."""
    server: ServerSettings = ServerSettings()
    """The verbs listener and the optional metrics listener."""
    provider: ProviderKind = "prometheus"
    """Where metric values come from: prometheus, or static (demos, tests)."""
    prometheus: PrometheusSettings = PrometheusSettings()
    """Used when provider: prometheus."""
    static: StaticSettings = StaticSettings()
    """Used when provider: static."""
    single_metrics: Metrics | None = Field(
        default=None, alias="metrics", json_schema_extra={"minItems": 1}
    )
    """The metrics of a single-policy file's one policy ("default"); unset and no
    `policies`: node CPU from a stock kube-prometheus-stack."""
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
    overload: OverloadSettings = OverloadSettings()
    """Overload taints, for cluster autoscalers (off by default)."""
    shadow: ShadowSettings = ShadowSettings()
    """Shadow mode (`decice-extender shadow`): our verdict on other schedulers' placements."""

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

    @property
    def policy_map(self) -> Mapping[str, Policy]:
        """name -> Policy, in file order."""
        return self._policies

    @property
    def default(self) -> Policy:
        """The policy of pods that do not name one."""
        return self._policies[self._default]

    def policy_for(self, name: str | None) -> Policy | None:
        """The policy a pod names, else the default (`policy_for`)."""
        return policy_for(self._policies, self.default, name)

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
    if s.overload.enabled:
        problems += _overload_problems(s)
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


def _overload_problems(s: Settings) -> list[str]:
    """overload.enabled needs metrics of the default policy with a filter.above."""
    policy = _raw_policies(s)[s.default_policy or next(iter(_raw_policies(s)))]
    above = {m.name for m in policy.metrics if m.filter is not None and m.filter.above is not None}
    unknown = [m for m in s.overload.metrics if m not in above]
    if unknown:
        return [
            f"overload.metrics: {unknown} are not metrics of the default policy with a "
            f"filter.above (those are {sorted(above)})"
        ]
    if not above:
        return [
            "overload.enabled: the default policy has no metric with a filter.above: nothing "
            "to taint by"
        ]
    return []


def policy_for(policies: Mapping[str, Policy], default: Policy, name: str | None) -> Policy | None:
    """The policy a pod names (`decice.io/policy`), else `default`; None when the named one
    does not exist. (A function of its own so the request path can call it with the
    policies it resolved once per install: Settings' private attributes are slow to read.)"""
    return default if name is None else policies.get(name)
