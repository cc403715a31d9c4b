"""What pods really use, per workload and per young pod: `herdGuard.usageQuery` and
`podUsageQuery` read into a `UsageTable`; a failed fetch keeps the last good one."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.errors.causes import describe
from extender.policy.sections import HerdGuardSettings

log = logging.getLogger("decice.usage")


@runtime_checkable
class Querier(Protocol):
    def query(self, promql: str, timeout: float | None = None) -> list[Any]:
        """Blocking: one instant query's `data.result`; raises on failure."""
        ...


def wanted(guard: HerdGuardSettings, guarded: bool) -> bool:
    """The estimates read measured use: the herd guard is on and counts by usage."""
    return guarded and guard.enabled and guard.estimate == "usage"


def fetch_usage(querier: Querier, guard: HerdGuardSettings, now: float) -> UsageTable:
    """Blocking (the refresher's thread): both queries, read into one table."""
    promql = guard.usage_query.replace("{quantile}", f"{guard.quantile:g}")
    workloads = read_workloads(querier.query(promql, guard.usage_timeout), guard.max_workloads)
    pods = read_pods(querier.query(guard.pod_usage_query, guard.usage_timeout), guard.max_workloads)
    return UsageTable(workloads=workloads, pods=pods, fetched_at=now)


def next_usage(previous: UsageTable, fetched: UsageTable | BaseException) -> UsageTable:
    """The table to install: the new one, or the last good one with the error beside it."""
    if isinstance(fetched, BaseException):
        return UsageTable(previous.workloads, previous.pods, previous.fetched_at, describe(fetched))
    return fetched


def sample_value(item: Any) -> float:
    """An instant-vector series' value; NaN when it is not a number."""
    sample = item.get("value")
    try:
        return float(sample[1]) if isinstance(sample, (list, tuple)) else math.nan
    except (TypeError, ValueError, IndexError):
        return math.nan


def _value(item: Any) -> float | None:
    value = sample_value(item)
    return value if math.isfinite(value) and value >= 0 else None


def _labels(item: Any) -> dict[str, Any]:
    labels = item.get("metric") if isinstance(item, dict) else None
    return labels if isinstance(labels, dict) else {}


def read_workloads(result: Sequence[Any], limit: int) -> dict[WorkloadKey, WorkloadUse]:
    """Series labelled namespace, workload, workload_type and stat (quantile, median,
    pods) -> each workload's use (left out without its quantile or count)."""
    quantiles: dict[WorkloadKey, float] = {}
    medians: dict[WorkloadKey, float] = {}
    counts: dict[WorkloadKey, int] = {}
    dropped = 0
    for item in result:
        labels = _labels(item)
        namespace, name, kind = (labels.get(k) for k in ("namespace", "workload", "workload_type"))
        value = _value(item) if labels else None
        if not all(isinstance(x, str) and x for x in (namespace, name, kind)) or value is None:
            dropped += 1
            continue
        key = WorkloadKey(str(namespace), str(kind).lower(), str(name))
        stat = labels.get("stat")
        if stat == "pods":
            counts[key] = int(value)
        elif stat == "median":
            medians[key] = value
        elif key in quantiles or len(quantiles) < limit:
            quantiles[key] = value
    if dropped:
        log.debug("usage: %d workload series without namespace/workload/type or value", dropped)
    return {
        k: WorkloadUse(v, counts[k], medians.get(k)) for k, v in quantiles.items() if k in counts
    }


def read_pods(result: Sequence[Any], limit: int) -> dict[tuple[str, str], float]:
    """Series labelled namespace and pod -> the pod's own use in cores."""
    pods: dict[tuple[str, str], float] = {}
    for item in result:
        labels = _labels(item)
        namespace, pod = labels.get("namespace"), labels.get("pod")
        value = _value(item) if labels else None
        if isinstance(namespace, str) and isinstance(pod, str) and pod and value is not None:
            pods[(namespace, pod)] = value
            if len(pods) >= limit:
                break
    return pods
