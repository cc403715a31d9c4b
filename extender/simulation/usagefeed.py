"""The measured use our extender's refresher fetches beside node CPU, from the pods' series.

Per workload (the pod's Deployment) the quantile and the median of its running pods'
measured CPU and how many were measured: what the stock recording rule
`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m` said at its
latest evaluation (ledger.PodMeter.rate: a pod younger than 5 minutes shows a share of its
use), summed per pod, joined to the pod's workload the way
`namespace_workload_pod:kube_pod_owner:relabel` names it; the quantile is PromQL's
(`quantile`: linear between ranks). Per young pod (created within YOUNG_POD seconds) its
own use from the `...:sum_irate` rule (ledger.PodMeter.irate: its last two samples). These
are the shipped `herdGuard.usageQuery` and `podUsageQuery`. The answer is
`extender.decisions.usage.UsageTable`, the contract with the engine.
"""

from __future__ import annotations

from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.simulation.ledger import PodMeter
from extender.simulation.stats import percentile

NAMESPACE = "sim"
"""Every simulated pod's namespace."""
YOUNG_POD = 900.0
"""Seconds after its creation a pod's own use is fetched (the shipped herdGuard.podUsageQuery
keeps pods whose kube_pod_created is under 900 s old)."""


def usage_table(meter: PodMeter, evaluated_at: float, quantile: float, now: float) -> UsageTable:
    """What the refresher fetches at `now` when the rule was last evaluated at
    `evaluated_at` (both in simulated seconds; `now` is stamped as fetched_at by the caller)."""
    by_workload: dict[str, list[float]] = {}
    pods: dict[tuple[str, str], float] = {}
    for uid, entry in meter.running.items():
        if entry.pod.workload:
            rate = meter.rate(entry, evaluated_at)
            if rate is not None:
                by_workload.setdefault(entry.pod.workload, []).append(rate)
        if evaluated_at - entry.pod.arrival < YOUNG_POD:
            own = meter.irate(entry, evaluated_at)
            if own is not None:
                pods[(NAMESPACE, uid)] = own
    workloads = {
        WorkloadKey(NAMESPACE, "deployment", name): WorkloadUse(
            percentile(values, 100 * quantile), len(values), percentile(values, 50)
        )
        for name, values in sorted(by_workload.items())
    }
    return UsageTable(workloads=workloads, pods=pods, fetched_at=now)
