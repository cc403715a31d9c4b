"""The stock kube-prometheus-stack series the default usage queries read, and the chart
setting behind each (kubernetes-mixin `rules/apps.libsonnet`), for doctor to name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StockSeries:
    name: str
    records: str  # what records it on a stock install, and the setting that turns it on


CONTAINER_CPU = StockSeries(
    "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m",
    "the k8s.rules.container_cpu_usage_seconds_total rules "
    "(kube-prometheus-stack defaultRules.rules.k8sContainerCpuUsageSecondsTotal)",
)
CONTAINER_CPU_NOW = StockSeries(
    "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate",
    CONTAINER_CPU.records,
)
POD_OWNER = StockSeries(
    "namespace_workload_pod:kube_pod_owner:relabel",
    "the k8s.rules.pod_owner rules (kube-prometheus-stack defaultRules.rules.k8sPodOwner)",
)
POD_CREATED = StockSeries(
    "kube_pod_created",
    "kube-state-metrics (kube-prometheus-stack kubeStateMetrics.enabled)",
)
WORKLOAD_USE = (CONTAINER_CPU, CONTAINER_CPU_NOW, POD_OWNER, POD_CREATED)


def used_by(query: str, series: tuple[StockSeries, ...]) -> tuple[StockSeries, ...]:
    """The stock series a query names."""
    return tuple(s for s in series if s.name in query)
