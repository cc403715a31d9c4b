"""The PromQL a replay asks, and which kube-prometheus-stack setting records each series.

Window queries (`max_over_time(...[W])` every W) read what kube-state-metrics says of
pods and nodes; fine queries, at the grid's step, read node CPU (the policy's own query)
and pods' measured use (the stock rule, summed per pod, for pods created in the range:
the only ones the replay moves). Names and expressions: kube-state-metrics'
docs/metrics/workload/pod-metrics.md and node-metrics.md, kubernetes-mixin's
rules/apps.libsonnet (the usage and owner rules), node-mixin (instance:node_cpu_*).
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
"""A required window input's key -> what the replay reads it for (named when missing)."""


@dataclass(frozen=True, slots=True)
class Input:
    key: str
    """What the facts call it (Facts.seen)."""
    series: str
    """The series named when it is missing."""
    promql: str
    required: bool


def matcher(namespaces: frozenset[str], *extra: str) -> str:
    """`{...}` with the namespace filter (namespaces are DNS labels: no quoting needed)."""
    parts = [*extra]
    if namespaces:
        parts.append(f'namespace=~"{"|".join(sorted(namespaces))}"')
    return "{" + ",".join(parts) + "}"


def window_inputs(window: str, node_ips: bool) -> list[Input]:
    """What kube-state-metrics says, as `max_over_time(...[window])`: of every pod, since
    kube-scheduler counts the requests of pods in namespaces the replay leaves alone."""
    pod = "namespace, pod, uid"

    def over(name: str, selector: str, by: str) -> str:
        return f"max by ({by}) (max_over_time({name}{selector}[{window}]))"

    out = [
        Input(
            "allocatable",
            "kube_node_status_allocatable",
            over(
                "kube_node_status_allocatable",
                '{resource=~"cpu|memory|pods"}',
                "node, resource",
            ),
            True,
        ),
        Input(
            "pod_info",
            "kube_pod_info",
            # Its samples per window, not its value (always 1): in the window its series
            # ends, how long into it the pod was still there (facts.PodFacts.tail).
            f"max by ({pod}, node, created_by_kind) (count_over_time(kube_pod_info[{window}]))",
            True,
        ),
        Input("created", "kube_pod_created", over("kube_pod_created", "", pod), True),
        Input(
            "requests",
            "kube_pod_container_resource_requests",
            f"sum by ({pod}, resource) (max_over_time(kube_pod_container_resource_requests"
            f'{{resource=~"cpu|memory"}}[{window}]))',
            True,
        ),
        Input(
            "owners",
            OWNER_RULE,
            over(OWNER_RULE, "", "namespace, pod, workload, workload_type"),
            True,
        ),
    ]
    for key, name in (
        ("started", "kube_pod_start_time"),
        ("scheduled", "kube_pod_status_scheduled_time"),
        ("completed", "kube_pod_completion_time"),
        ("deleted", "kube_pod_deletion_timestamp"),
    ):
        out.append(Input(key, name, over(name, "", pod), False))
    out += [
        Input(
            "scheduler", "kube_pod_scheduler", over("kube_pod_scheduler", "", f"{pod}, name"), False
        ),
        Input(
            "selectors",
            "kube_pod_nodeselectors",
            f"max_over_time(kube_pod_nodeselectors[{window}])",
            False,
        ),
        Input(
            "tolerations",
            "kube_pod_tolerations",
            over("kube_pod_tolerations", "", f"{pod}, key, effect"),
            False,
        ),
        Input(
            "taints",
            "kube_node_spec_taint",
            over("kube_node_spec_taint", "", "node, key, effect"),
            False,
        ),
    ]
    if node_ips:
        out.append(
            Input(
                "node_info", "kube_node_info", over("kube_node_info", "", "node, internal_ip"), True
            )
        )
    return out


def usage_query(namespaces: frozenset[str], created_from: float) -> str:
    """Each pod created from `created_from` on: its measured CPU in cores."""
    ns = matcher(namespaces)
    return (
        f"sum by (namespace, pod) ({USAGE_RULE}{ns}) and on (namespace, pod) "
        f"(max by (namespace, pod) (kube_pod_created{ns}) >= {created_from:.0f})"
    )


def usage_presence(namespaces: frozenset[str]) -> str:
    return f"count({USAGE_RULE}{matcher(namespaces)})"


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


def setting_of(series: str) -> str:
    return SETTINGS.get(series, "not a kube-prometheus-stack series: check the query")
