"""A placed pod's expected CPU use, what the herd guard counts it at: requests lie, so its
own measured use, else its workload's quantile, else its request times `requestFactor`
(or `defaultCpuRequest`). Pure.

Peers, for comparison: Koordinator's LoadAware counts max(request, limit) x 0.85
(pkg/scheduler/plugins/loadaware/estimator/default_estimator.go); Trimaran's
TargetLoadPacking the limit, else request x 1.5 (pkg/trimaran/handler.go).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from extender.decisions.usage import UsageTable, WorkloadKey
from extender.policy.sections import HerdGuardSettings

SOURCES = ("workload", "own", "request", "default")
"""Where an estimate came from (the label of decice_herd_estimates_total)."""
MEASURED = frozenset({"workload", "own"})
"""The sources that are measured use, not a pod's request."""


@dataclass(frozen=True, slots=True)
class Expectation:
    cores: float
    source: str
    basis: str
    """Why this figure, in words: "p90 of 12 pods of deployment shop/web"."""

    def __str__(self) -> str:
        return f"expects {self.cores:.3g} core ({self.basis})"


def usage_fresh(usage: UsageTable, guard: HerdGuardSettings, now: float) -> bool:
    return usage.fetched_at is not None and now - usage.fetched_at <= guard.usage_max_age


def expected_use(
    namespace: str,
    name: str,
    workload: WorkloadKey | None,
    request: float | None,
    usage: UsageTable,
    guard: HerdGuardSettings,
    now: float,
) -> Expectation:
    if guard.estimate == "usage":
        fresh = usage_fresh(usage, guard, now)
        own = usage.pods.get((namespace, name)) if fresh else None
        if own is not None:
            return Expectation(own, "own", "its own measured use")
        use = usage.workloads.get(workload) if fresh and workload is not None else None
        if use is not None and use.pods >= guard.min_pods:
            quantile = f"p{100 * guard.quantile:g}"
            return Expectation(
                use.cores, "workload", f"{quantile} of {use.pods} pods of {workload}"
            )
        why = _why_not_measured(workload, use, usage, guard, fresh)
    else:
        why = "herdGuard.estimate: request"
    if request is not None:
        factor = guard.request_factor if guard.estimate == "usage" else 1.0
        times = f" x {factor:g}" if factor != 1.0 else ""
        return Expectation(request * factor, "request", f"its request{times}; {why}")
    return Expectation(guard.default_cpu_request, "default", f"no CPU request; {why}")


def expected_cores(
    namespace: str,
    name: str,
    workload: Callable[[], WorkloadKey | None],
    request: float | None,
    usage: UsageTable,
    guard: HerdGuardSettings,
    now: float,
) -> float:
    """What the pod being placed will most likely use, for the filter path's fit: as
    `expected_use`, but its workload's median where known (the quantile covers a burst)."""
    if guard.estimate == "usage" and usage_fresh(usage, guard, now):
        own = usage.pods.get((namespace, name)) if usage.pods else None
        if own is not None:
            return own
        if usage.workloads:
            use = usage.workloads.get(workload())  # type: ignore[arg-type]
            if use is not None and use.pods >= guard.min_pods:
                return use.cores if use.median is None else use.median
    factor = guard.request_factor if guard.estimate == "usage" else 1.0
    return request * factor if request is not None else guard.default_cpu_request


def _why_not_measured(
    workload: WorkloadKey | None,
    use: object,
    usage: UsageTable,
    guard: HerdGuardSettings,
    fresh: bool,
) -> str:
    if workload is None:
        return "no workload owns it"
    if usage.fetched_at is None:
        return "no measured use yet" + (f" ({usage.error})" if usage.error else "")
    if not fresh:
        return "the measured use is stale"
    if use is None:
        return f"no measured pods of {workload}"
    pods = getattr(use, "pods", 0)
    return f"{pods} measured pods of {workload}, fewer than minPods {guard.min_pods}"
