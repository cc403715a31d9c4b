"""`decice-extender doctor`: is this policy going to work against this cluster?

`examine` gathers what the pure checks (extender.doctor.prometheus, .cluster) read through
a blocking Prometheus query function and a Kubernetes client it is given
(extender.metrics.providers.PrometheusProvider.query, extender.cluster.client.KubeClient),
so this package imports neither client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.model import NodeInfo
from extender.decisions.usage import WorkloadKey, WorkloadUse
from extender.doctor.backend import AskBuildInfo, BuildInfo, backend_row, identify, tenant_row
from extender.doctor.cluster import nodes_row, permission_row, permissions
from extender.doctor.herd import present, usage_row, window_row
from extender.doctor.prometheus import (
    Query,
    Series,
    age_row,
    mapping_row,
    parse_series,
    query_row,
    range_row,
    reachable_row,
    timestamp_query,
)
from extender.doctor.rows import Row
from extender.errors.causes import PartialAnswer, describe
from extender.metrics.stock import WORKLOAD_USE, used_by
from extender.metrics.usage import read_workloads, wanted
from extender.policy.settings import Settings
from extender.policy.windows import herd_window


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
        try:
            nodes = (await kube.list_nodes())[0]
        except Exception as exc:
            rows.append(nodes_row(exc))
        else:
            rows.append(nodes_row(nodes))
    if query is None:
        rows.append(Row("prometheus", "ok", "not used (static provider)"))
    else:
        rows.extend(await _prometheus_rows(settings, query, nodes, clock, build_info))
    if kube is not None:
        for permission in permissions(settings):
            answer: tuple[bool, str] | BaseException
            try:
                answer = await kube.access_review(
                    permission.verb,
                    permission.resource,
                    group=permission.group,
                    subresource=permission.subresource,
                    namespace=permission.namespace,
                )
            except Exception as exc:
                answer = exc
            rows.append(permission_row(permission, answer))
    return rows


async def _prometheus_rows(
    settings: Settings,
    query: Query,
    nodes: list[NodeInfo] | None,
    clock: Callable[[], float],
    build_info: AskBuildInfo | None,
) -> list[Row]:
    async def ask(promql: str) -> list[Series] | BaseException:
        try:
            return parse_series(await asyncio.to_thread(query, promql))
        except Exception as exc:
            return exc

    reached = await ask("vector(1)")
    # A partial answer is an answer: the server is there (its stores are checked below).
    error = None
    if isinstance(reached, BaseException) and not isinstance(reached, PartialAnswer):
        error = reached
    rows = [reachable_row(settings.prometheus, error)]
    backend = None
    if build_info is not None:
        try:
            answer: BuildInfo | BaseException = await asyncio.to_thread(build_info)
        except Exception as exc:
            answer = exc
        rows.append(backend_row(answer))
        backend = None if isinstance(answer, BaseException) else identify(answer)
    tenant = tenant_row(settings.prometheus, backend, error)
    if tenant is not None:
        rows.append(tenant)
    if error is not None:
        return rows
    users: dict[str, list[str]] = {}
    for name, policy in settings.policy_map.items():
        for m in policy.metrics:
            users.setdefault(m.name, []).append(name)
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
            row = replace(row, detail=f"{row.detail} (policies {', '.join(users[metric.name])})")
        rows.append(row)
        if isinstance(series, BaseException) or not series:
            continue
        if nodes is None:
            rows.append(Row(f"nodes {metric.name}", "warn", "not checked: no node list"))
        else:
            rows.append(mapping_row(metric, series, nodes, settings.prometheus.node_label))
        stamps = await ask(timestamp_query(metric.query))
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
    rows = [window_row(herd_window(settings), guard)]
    if not wanted(guard, settings.herd_guarded):
        return rows
    promql = guard.usage_query.replace("{quantile}", f"{guard.quantile:g}")
    workloads: Mapping[WorkloadKey, WorkloadUse] | BaseException
    try:
        workloads = read_workloads(await asyncio.to_thread(query, promql), guard.max_workloads)
    except Exception as exc:
        workloads = exc
    missing = []
    if not isinstance(workloads, BaseException) and not workloads:
        for stock in used_by(guard.usage_query + guard.pod_usage_query, WORKLOAD_USE):
            if not present(await ask(f"count({stock.name})")):
                missing.append(stock)
    rows.append(usage_row(workloads, guard, missing))
    return rows
