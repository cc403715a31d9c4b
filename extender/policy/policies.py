"""What one policy is: its metrics (query, weight, direction, normalisation, filter,
what missing data means) and the policy the engine resolves from them; the default PromQL
of node CPU and of pods' use (herdGuard.usageQuery, podUsageQuery)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field, StrictStr, model_validator

from extender.policy.fields import (
    Direction,
    MetricName,
    MissingPolicy,
    Model,
    Normalize,
    Number,
    Positive,
    Seconds,
)

DEFAULT_CPU_QUERY = """max by (node) (
  (
    label_replace(
      instance:node_cpu_utilisation:rate5m{job="node-exporter"},
      "window", "5m", "", ""
    )
    or
    label_replace(
      1 - avg without (cpu) (
        sum without (mode) (
          rate(node_cpu_seconds_total{job="node-exporter", mode=~"idle|iowait|steal"}[1m])
        )
      ),
      "window", "1m", "", ""
    )
  )
  * on (namespace, pod) group_left (node)
    topk by (namespace, pod) (1, node_namespace_pod:kube_pod_info:)
)"""
"""Node CPU utilisation 0..1 by node name, rising fast and falling slow: the larger of a
1-minute rate of node-exporter's counters (a rise shows within a minute) and
kube-prometheus-stack's 5-minute rule (a fall shows slowly, so one quiet minute does not
invite a herd). node-exporter series carry no node label, so they join kube_pod_info."""

_PODS_OF_WORKLOADS = """
    sum by (namespace, pod) (
      node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m
    )
    * on (namespace, pod) group_left (workload, workload_type)
      topk by (namespace, pod) (1,
        namespace_workload_pod:kube_pod_owner:relabel{workload_type!~"(?i:barepod|staticpod)"}
      )
  )"""
"""Each running pod's CPU use, labelled with its workload (the aggregations' operand)."""


def _stat(aggregation: str, stat: str, parameter: str = "") -> str:
    """One statistic per workload, labelled `stat` so one query answers all three."""
    return f"""label_replace(
  {aggregation} by (namespace, workload, workload_type) ({parameter}{_PODS_OF_WORKLOADS},
  "stat", "{stat}", "", ""
)"""


DEFAULT_WORKLOAD_USAGE_QUERY = "\nor\n".join(
    (
        _stat("quantile", "quantile", "{quantile},"),  # filled in with herdGuard.quantile
        _stat("quantile", "median", "0.5,"),
        _stat("count", "pods"),
    )
)
"""Per workload, the quantile and the count of its running pods' CPU use, from the
kube-prometheus-stack recording rules (kubernetes-mixin rules/apps.libsonnet). Bare and
static pods are no workload of siblings (the rules name each after itself): left out."""

DEFAULT_POD_USAGE_QUERY = """sum by (namespace, pod) (
  node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate
)
and on (namespace, pod)
  (time() - max by (namespace, pod) (kube_pod_created{job="kube-state-metrics"}) < 900)"""
"""Per pod created in the last 15 minutes, its own CPU use now: the stock `sum_irate` rule
(the rate between its last two samples). Not the `sum_rate5m` rule: a rate divides by its
whole window, so a pod seconds old would show a few seconds' worth of its use."""


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


def checked_metrics(metrics: tuple[MetricSettings, ...]) -> tuple[MetricSettings, ...]:
    """A policy's metrics: at least one, each name once."""
    if not metrics:
        raise ValueError("must list at least one metric (a policy with no metrics scores nothing)")
    names = [m.name for m in metrics]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"duplicate metric name(s) {', '.join(map(repr, twice))}")
    return metrics


Metrics = Annotated[tuple[MetricSettings, ...], AfterValidator(checked_metrics)]


class PolicySettings(Model):
    metrics: Metrics = Field(json_schema_extra={"minItems": 1})
    """The metrics this policy filters and scores by (at least one)."""
    herd_metric: MetricName | None = None
    """The metric the herd guard adds a placed pod's expected CPU use to. Unset:
    herdGuard.metric when this policy has that metric, else no herd guard for this policy."""
    description: StrictStr = ""
    """What the policy is for (shown by doctor and /explain)."""


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
