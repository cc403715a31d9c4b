"""The doctor's herd-guard checks, pure: the window the reservations fade over, and whether
the measured use the estimates read is there (else every pod counts at its request)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from extender.decisions.usage import WorkloadKey, WorkloadUse
from extender.doctor.prometheus import Series
from extender.doctor.rows import Row, few
from extender.errors.causes import describe
from extender.metrics.stock import StockSeries
from extender.policy.sections import HerdGuardSettings
from extender.policy.windows import Window


def window_row(window: Window, guard: HerdGuardSettings) -> Row:
    fade = f"then fading over {window.seconds:g}s" if window.seconds else "then gone at once"
    return Row("herd window", "ok", f"whole for {guard.settle:g}s, {fade}: {window.why}")


def usage_row(
    workloads: Mapping[WorkloadKey, WorkloadUse] | BaseException,
    guard: HerdGuardSettings,
    missing: Sequence[StockSeries] = (),
) -> Row:
    """What the workload query answered; `missing`: the stock series it reads that the
    server has none of (asked only when it answered nothing)."""
    fallback = "placed pods count at their CPU request until it answers"
    if isinstance(workloads, BaseException):
        return Row("workload use", "warn", f"{describe(workloads)}; {fallback}")
    if not workloads:
        if missing:
            named = "; ".join(f"{s.name}, recorded by {s.records}" for s in missing)
            return Row("workload use", "warn", f"no answer: missing {named}; {fallback}")
        return Row("workload use", "warn", f"the query answered no workload; {fallback}")
    trusted = {k: u for k, u in workloads.items() if u.pods >= guard.min_pods}
    examples = few(
        f"{k} p{100 * guard.quantile:g} {u.cores:.3g} core of {u.pods} pods"
        for k, u in sorted(trusted.items())[:3]
    )
    return Row(
        "workload use",
        "ok",
        f"{len(workloads)} workloads measured, {len(trusted)} with at least minPods "
        f"{guard.min_pods} pods" + (f", e.g. {examples}" if trusted else ""),
    )


def present(series: Sequence[Series] | BaseException) -> bool:
    """A `count(name)` answer says the series exists."""
    return not isinstance(series, BaseException) and bool(series) and series[0].value > 0
