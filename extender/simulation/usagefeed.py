"""The measured use our extender's refresher fetches beside node CPU, from the pods' series.

Per workload (the pod's Deployment) the quantile of its running pods' measured CPU and how
many were measured; per young pod (created within YOUNG_POD seconds) its own measured CPU.
"Measured" is what the stock recording rule
`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m` said at its
latest evaluation (ledger.PodMeter.rate), summed per pod, joined to the pod's workload the
way `namespace_workload_pod:kube_pod_owner:relabel` names it. The quantile is PromQL's
(`quantile`: linear between ranks). The answer is `extender.decisions.usage.UsageTable`,
the contract with the engine.
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
        rate = meter.rate(entry, evaluated_at)
        if rate is None:
            continue
        if entry.pod.workload:
            by_workload.setdefault(entry.pod.workload, []).append(rate)
        if evaluated_at - entry.pod.arrival < YOUNG_POD:
            pods[(NAMESPACE, uid)] = rate
    workloads = {
        WorkloadKey(NAMESPACE, "deployment", name): WorkloadUse(
            percentile(values, 100 * quantile), len(values)
        )
        for name, values in sorted(by_workload.items())
    }
    return UsageTable(workloads=workloads, pods=pods, fetched_at=now)
