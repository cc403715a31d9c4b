"""The PromQL a replay asks, and which kube-prometheus-stack setting records each series
(kube-state-metrics' docs/metrics/workload/pod-metrics.md, kubernetes-mixin's rules).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import promql_parser

USAGE_RULE = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m"
OWNER_RULE = "namespace_workload_pod:kube_pod_owner:relabel"
KSM = "kube-state-metrics (kubeStateMetrics.enabled, on by default)"

SETTINGS = {
    "kube_node_status_allocatable": KSM,
    "kube_node_info": KSM,
    "kube_pod_info": KSM,
    "kube_pod_created": KSM,
    "kube_pod_container_resource_requests": KSM,
    OWNER_RULE: "defaultRules.rules.k8sPodOwner (from kube-state-metrics' kube_pod_owner "
    "and kube_replicaset_owner)",
    USAGE_RULE: "defaultRules.rules.k8sContainerCpuUsageSecondsTotal (from cAdvisor's "
    "container_cpu_usage_seconds_total: kubelet.serviceMonitor.cAdvisor)",
    "instance:node_cpu_utilisation:rate5m": "defaultRules.rules.nodeExporterRecording "
    "(from node-exporter's node_cpu_seconds_total: nodeExporter.enabled)",
    "node_namespace_pod:kube_pod_info:": "defaultRules.rules.node",
    "node_cpu_seconds_total": "nodeExporter.enabled",
    "container_cpu_usage_seconds_total": "kubelet.serviceMonitor.cAdvisor",
}
"""Series -> what records it in kube-prometheus-stack (values.yaml)."""

PURPOSES = {
    "allocatable": "nodes and their allocatable CPU",
    "pod_info": "pods and the nodes they ran on",
    "created": "pods' arrivals",
    "requests": "pods' requests",
    "owners": "pods' workloads",
    "node_info": "node addresses, for prometheus.nodeLabel: instance",
}
"""A required input's key -> what the replay reads it for."""


@dataclass(frozen=True, slots=True)
class Input:
    key: str
    series: str
    promql: str
    required: bool


def matcher(namespaces: frozenset[str], *extra: str) -> str:
    """`{...}` with the namespace filter (DNS labels: no quoting needed)."""
    parts = [*extra]
    if namespaces:
        parts.append(f'namespace=~"{"|".join(sorted(namespaces))}"')
    return "{" + ",".join(parts) + "}"


WINDOW_INPUTS = (
    ("allocatable", "kube_node_status_allocatable", "node, resource", True),
    ("pod_info", "kube_pod_info", "", True),
    ("created", "kube_pod_created", "", True),
    ("requests", "kube_pod_container_resource_requests", "", True),
    ("owners", OWNER_RULE, "namespace, pod, workload, workload_type", True),
    ("started", "kube_pod_start_time", "", False),
    ("scheduled", "kube_pod_status_scheduled_time", "", False),
    ("completed", "kube_pod_completion_time", "", False),
    ("deleted", "kube_pod_deletion_timestamp", "", False),
    ("scheduler", "kube_pod_scheduler", ", name", False),
    ("selectors", "kube_pod_nodeselectors", "", False),
    ("tolerations", "kube_pod_tolerations", ", key, effect", False),
    ("taints", "kube_node_spec_taint", "node, key, effect", False),
)
"""(key, series, labels kept: a pod's and these when starting with ",", required)."""


def window_inputs(window: str, node_ips: bool) -> list[Input]:
    """Every pod's series (kube-scheduler counts the pods the replay leaves alone too)."""
    pod = "namespace, pod, uid"
    special = {
        # Samples per window (its value is 1): when in its last window the pod ended.
        "pod_info": f"max by ({pod}, node, created_by_kind) "
        f"(count_over_time(kube_pod_info[{window}]))",
        "requests": f"sum by ({pod}, resource) (max_over_time("
        f'kube_pod_container_resource_requests{{resource=~"cpu|memory"}}[{window}]))',
        "selectors": f"max_over_time(kube_pod_nodeselectors[{window}])",
        "allocatable": "max by (node, resource) (max_over_time(kube_node_status_allocatable"
        f'{{resource=~"cpu|memory|pods"}}[{window}]))',
    }
    inputs = list(WINDOW_INPUTS)
    if node_ips:
        inputs.append(("node_info", "kube_node_info", "node, internal_ip", True))
    out = []
    for key, name, by, required in inputs:
        by = pod + by if by[:1] in ("", ",") else by
        promql = special.get(key) or f"max by ({by}) (max_over_time({name}[{window}]))"
        out.append(Input(key, name, promql, required))
    return out


def usage_query(namespaces: frozenset[str], created_from: float) -> str:
    ns = matcher(namespaces)
    return (
        f"sum by (namespace, pod) ({USAGE_RULE}{ns}) and on (namespace, pod) "
        f"(max by (namespace, pod) (kube_pod_created{ns}) >= {created_from:.0f})"
    )


def selectors_in(query: str) -> list[str]:
    """The series names a PromQL expression reads, in order, each once."""
    try:
        tree = promql_parser.parse(query)
    except (ValueError, TypeError):
        return []
    seen: dict[str, None] = {}
    for node in _walk(tree):
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            seen.setdefault(node.name, None)
    return list(seen)


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, str | int | float):
            yield from _walk(child)
    for arg in getattr(node, "args", None) or []:
        yield from _walk(arg)
