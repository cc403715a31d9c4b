"""The measured use our refresher fetches beside node CPU (the shipped `herdGuard.usageQuery`
and `podUsageQuery`): per Deployment the quantile and median of its pods' `...:sum_rate5m`;
per pod younger than YOUNG_POD its own `...:sum_irate`.
"""

from __future__ import annotations

from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.simulation.ledger import PodMeter
from extender.simulation.stats import percentile

NAMESPACE = "sim"
YOUNG_POD = 900.0  # the shipped podUsageQuery's age limit


def usage_table(meter: PodMeter, evaluated_at: float, quantile: float, now: float) -> UsageTable:
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
