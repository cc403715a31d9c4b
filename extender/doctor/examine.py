"""`decice-extender doctor`: is this policy going to work against this cluster? `examine`
gathers what the pure checks read through the query function and Kubernetes client it is
given (this package imports neither client); the herd guard's checks are here too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.model import NodeInfo
from extender.decisions.usage import WorkloadKey, WorkloadUse
from extender.doctor.backend import AskBuildInfo, backend_row, identify, tenant_row
from extender.doctor.cluster import nodes_row, permission_row, permissions
from extender.doctor.prometheus import (
    Query,
    Series,
    age_row,
    mapping_row,
    parse_series,
    query_row,
    range_row,
    reachable_row,
)
from extender.doctor.rows import Row, few
from extender.errors.causes import PartialAnswer, describe
from extender.metrics.stock import WORKLOAD_USE, StockSeries, used_by
from extender.metrics.usage import read_workloads, wanted
from extender.policy.sections import HerdGuardSettings
from extender.policy.settings import Settings
from extender.policy.windows import herd_window

T = TypeVar("T")


async def _caught(call: Awaitable[T]) -> T | BaseException:
    """The call's answer, or what it raised: each check reports its own failure."""
    try:
        return await call
    except Exception as exc:
        return exc


async def examine(
    settings: Settings,
    query: Query | None,
    kube: KubeAPI | None,
    kube_problem: str | None = None,
    clock: Callable[[], float] = time.time,
    build_info: AskBuildInfo | None = None,
) -> list[Row]:
    """Every check of the policy, in order. `query` None: the static provider;
    `build_info` None: the backend is not named."""
    rows: list[Row] = []
    nodes: list[NodeInfo] | None = None
    if kube is None:
        rows.append(Row("kubernetes", "FAIL", f"no client: {kube_problem or 'not configured'}"))
    else:
        listed = await _caught(kube.list_nodes())
        rows.append(nodes_row(listed if isinstance(listed, BaseException) else listed[0]))
        nodes = None if isinstance(listed, BaseException) else listed[0]
    if query is None:
        rows.append(Row("prometheus", "ok", "not used (static provider)"))
    else:
        rows.extend(await _prometheus_rows(settings, query, nodes, clock, build_info))
    if kube is not None:
        for p in permissions(settings):
            review = kube.access_review(
                p.verb, p.resource, group=p.group, subresource=p.subresource, namespace=p.namespace
            )
            rows.append(permission_row(p, await _caught(review)))
    return rows


async def _prometheus_rows(
    settings: Settings,
    query: Query,
    nodes: list[NodeInfo] | None,
    clock: Callable[[], float],
    build_info: AskBuildInfo | None,
) -> list[Row]:
    async def ask(promql: str) -> list[Series] | BaseException:
        return await _caught(asyncio.to_thread(lambda: parse_series(query(promql))))

    reached = await ask("vector(1)")
    # A partial answer is an answer: the server is there (its stores are checked below).
    error = None
    if isinstance(reached, BaseException) and not isinstance(reached, PartialAnswer):
        error = reached
    rows = [reachable_row(settings.prometheus, error)]
    backend = None
    if build_info is not None:
        answer = await _caught(asyncio.to_thread(build_info))
        rows.append(backend_row(answer))
        backend = None if isinstance(answer, BaseException) else identify(answer)
    tenant = tenant_row(settings.prometheus, backend, error)
    if tenant is not None:
        rows.append(tenant)
    if error is not None:
        return rows
    for metric in settings.fetched_metrics:
        series = await ask(metric.query)
        row = query_row(metric, series)
        if isinstance(series, PartialAnswer):  # say so, and check what did come
            row = Row(
                row.check,
                "warn",
                f"{describe(series)}; until a whole answer the metric keeps its last whole "
                f"values, which count as missing after maxAge ({metric.max_age:g} s)",
            )
            series = parse_series(series.result)
        if settings.policies is not None:  # named policies: say which use the metric
            uses = {n: {m.name for m in p.metrics} for n, p in settings.policy_map.items()}
            users = [n for n, names in uses.items() if metric.name in names]
            row = replace(row, detail=f"{row.detail} (policies {', '.join(users)})")
        rows.append(row)
        if isinstance(series, BaseException) or not series:
            continue
        if nodes is None:
            rows.append(Row(f"nodes {metric.name}", "warn", "not checked: no node list"))
        else:
            rows.append(mapping_row(metric, series, nodes, settings.prometheus.node_label))
        # A plain selector's sample times are its scrapes; an expression's, the query time.
        stamps = await ask(f"timestamp({metric.query})")
        now = clock()
        if isinstance(stamps, BaseException):
            rows.append(Row(f"age {metric.name}", "warn", describe(stamps)))
        else:
            rows.append(age_row(metric, stamps, now, settings.prometheus.node_label))
        rows.append(range_row(metric, [s.value for s in series]))
    rows.extend(await _herd_rows(settings, query, ask))
    return rows


async def _herd_rows(
    settings: Settings, query: Query, ask: Callable[[str], Awaitable[list[Series] | BaseException]]
) -> list[Row]:
    """The herd guard's window, and the measured use its estimates read."""
    guard = settings.herd_guard
    if not settings.herd_guarded:
        return []
    window = herd_window(settings)
    rows = [Row("herd window", "ok", f"{window.fade(guard.settle)}: {window.why}")]
    if not wanted(guard, settings.herd_guarded):
        return rows
    promql = guard.usage_query.replace("{quantile}", f"{guard.quantile:g}")
    workloads = await _caught(
        asyncio.to_thread(lambda: read_workloads(query(promql), guard.max_workloads))
    )
    missing = []
    if not isinstance(workloads, BaseException) and not workloads:
        for stock in used_by(guard.usage_query + guard.pod_usage_query, WORKLOAD_USE):
            counted = await ask(f"count({stock.name})")
            if isinstance(counted, BaseException) or not counted or counted[0].value <= 0:
                missing.append(stock)
    rows.append(usage_row(workloads, guard, missing))
    return rows


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
