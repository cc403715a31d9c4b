"""The measured use our refresher fetches beside node CPU (the shipped
`herdGuard.usageQuery` and `podUsageQuery`), as an `extender.decisions.usage.UsageTable`.

Per Deployment: the quantile (PromQL's `quantile`) and median of its running pods' use by
the stock `...:sum_rate5m` rule at its latest evaluation, and how many were measured. Per
pod younger than YOUNG_POD: its own use by the `...:sum_irate` rule.
"""

from __future__ import annotations

from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.simulation.ledger import PodMeter
from extender.simulation.stats import percentile

NAMESPACE = "sim"
YOUNG_POD = 900.0
"""The shipped podUsageQuery keeps pods whose kube_pod_created is under 900 s old."""


def usage_table(meter: PodMeter, evaluated_at: float, quantile: float, now: float) -> UsageTable:
    """What the refresher fetches at `now`, the rule last evaluated at `evaluated_at`."""
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
