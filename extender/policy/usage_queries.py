"""The herd guard's default PromQL for what pods use (herdGuard.usageQuery, podUsageQuery)."""

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
