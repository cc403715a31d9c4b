"""`decice-extender doctor`: is this policy going to work against this cluster?

Checks, one row each, status ok / warn / FAIL with the likely cause:

* Prometheus answers with the policy's auth (url, headers, bearerTokenFile, basicAuth, caFile);
* each metric's query runs and returns series;
* the series map to the cluster's nodes (nodeLabel, `instance` addresses, joins);
* their samples are younger than the metric's maxAge;
* their values fall inside min..max of range normalisation;
* the Kubernetes permissions the policy needs (SelfSubjectAccessReview).

The diagnoses are pure functions of series label sets, the node list and the policy;
`examine` gathers those through a blocking Prometheus query function and a Kubernetes
client it is given (extender.metrics.PrometheusProvider.query, extender.kube.KubeClient),
so this module imports neither client.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from tabulate import tabulate

from extender.causes import describe
from extender.config import MetricSettings, PrometheusSettings, Settings
from extender.metrics import node_of
from extender.model import NodeInfo, NodeInventory

Status = Literal["ok", "warn", "FAIL"]
#: A blocking instant query: `data.result` as Prometheus sent it; raises on failure.
Query = Callable[[str], Sequence[Any]]

_SHOWN = 3
_JOIN = re.compile(r"\b(on|ignoring|group_left|group_right)\s*\(|\b(and|unless)\b")


@dataclass(frozen=True, slots=True)
class Row:
    check: str
    status: Status
    detail: str


@dataclass(frozen=True, slots=True)
class Series:
    """One series of an instant-vector answer: its labels, value and sample time."""

    labels: Mapping[str, str]
    value: float
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Permission:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    why: str = ""
    required: bool = True
    """False: a denial is a warning (a feature not in use yet)."""

    @property
    def name(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {what}" + (f".{self.group}" if self.group else "")


class Kube(Protocol):
    """What the doctor asks of the Kubernetes API (extender.kube.KubeClient)."""

    async def list_nodes(self) -> tuple[list[NodeInfo], str]: ...

    async def access_review(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str = "",
    ) -> tuple[bool, str]: ...


# --- parsing ---------------------------------------------------------------------------


def parse_series(result: Sequence[Any]) -> list[Series]:
    """An instant-vector `data.result` as Series; items that are not series are left out,
    values that are not numbers become NaN."""
    out: list[Series] = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            continue
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        sample = item.get("value")
        value, stamp = math.nan, None
        if isinstance(sample, (list, tuple)) and len(sample) == 2:
            try:
                stamp = float(sample[0])
                value = float(sample[1])
            except (TypeError, ValueError):
                pass
        out.append(Series(labels, value, stamp))
    return out


def _few(items: Iterable[str], n: int = _SHOWN) -> str:
    listed = sorted(set(items))
    more = f" (+{len(listed) - n} more)" if len(listed) > n else ""
    return ", ".join(listed[:n]) + more


def _number(value: float) -> str:
    return f"{value:.4g}"


# --- Prometheus ------------------------------------------------------------------------


def auth_text(prometheus: PrometheusSettings) -> str:
    """How we authenticate to Prometheus, for the reachability row (never a secret)."""
    parts = []
    if prometheus.bearer_token_file:
        parts.append(f"bearer token from {prometheus.bearer_token_file}")
    if prometheus.basic_auth is not None:
        parts.append(f"basic auth as {prometheus.basic_auth.username}")
    if prometheus.headers:
        parts.append(f"headers {_few(prometheus.headers, 5)}")
    if prometheus.ca_file:
        parts.append(f"CA {prometheus.ca_file}")
    if prometheus.insecure_skip_verify:
        parts.append("TLS not verified")
    return "; ".join(parts) or "no auth"


def reachable_row(prometheus: PrometheusSettings, error: BaseException | None) -> Row:
    if error is None:
        return Row("prometheus", "ok", f"{prometheus.url} answers ({auth_text(prometheus)})")
    return Row(
        "prometheus",
        "FAIL",
        f"{prometheus.url} ({auth_text(prometheus)}): {describe(error)}; metrics not checked",
    )


def query_row(metric: MetricSettings, series: Sequence[Series] | BaseException) -> Row:
    check = f"query {metric.name}"
    if isinstance(series, BaseException):
        return Row(check, "FAIL", describe(series))
    if not series:
        return Row(
            check,
            "FAIL",
            "no series: the query matches nothing now (metric or label names, a recording "
            "rule not loaded, or its targets down)",
        )
    return Row(check, "ok", f"{len(series)} series")


def _node_names_label(series: Sequence[Series], names: set[str]) -> str | None:
    """A label (other than `instance`) whose values are node names, if any series has one."""
    counts: dict[str, int] = {}
    for s in series:
        for label, value in s.labels.items():
            if label not in ("instance", "__name__") and value in names:
                counts[label] = counts.get(label, 0) + 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else None


def mapping_row(
    metric: MetricSettings, series: Sequence[Series], nodes: Sequence[NodeInfo], node_label: str
) -> Row:
    """Which nodes have data, which do not, which series map to no node, and why."""
    check = f"nodes {metric.name}"
    inventory = NodeInventory.from_nodes(list(nodes))
    names = {n.name for n in nodes}
    unlabelled: list[Series] = []
    unknown: list[str] = []
    have: dict[str, int] = {}
    bad_values = 0
    for s in series:
        node = node_of(s.labels, node_label, inventory)
        if node is None:
            unlabelled.append(s)
        elif node not in names:
            unknown.append(s.labels.get(node_label, node))
        else:
            have[node] = have.get(node, 0) + 1
            bad_values += not math.isfinite(s.value)
    missing = names - set(have)
    causes: list[str] = []
    if unlabelled:
        others = {k for s in unlabelled for k in s.labels if k != "__name__"}
        text = (
            f"{len(unlabelled)} of {len(series)} series have no {node_label!r} label "
            f"(prometheus.nodeLabel wrong?); their labels: {', '.join(sorted(others)) or 'none'}"
        )
        better = _node_names_label(unlabelled, names)
        if better is not None:
            text += f"; {better!r} holds node names: set prometheus.nodeLabel: {better}"
        elif any(
            node_of(s.labels, "instance", inventory) in names
            for s in unlabelled
            if "instance" in s.labels
        ):
            text += "; 'instance' holds node addresses: set prometheus.nodeLabel: instance"
        causes.append(text)
    if unknown and node_label == "instance":
        ips = [ip for n in nodes for ip in n.internal_ips]
        causes.append(
            f"instance {_few(unknown)} match no node InternalIP "
            f"(the nodes have {_few(ips) or 'no InternalIP'}): another network, or a "
            "NodePort/proxy address"
        )
    elif unknown:
        causes.append(
            f"{len(unknown)} series name nodes the API does not list: {_few(unknown)} "
            "(another cluster, or a label holding something else than the node name)"
        )
    if missing and have and len(series) < len(names):
        join = " (a join in the query drops them)" if _JOIN.search(metric.query) else ""
        causes.append(f"the query returns {len(series)} series for {len(names)} nodes{join}")
    if missing:
        causes.insert(0, f"no data for {len(missing)} of {len(names)} nodes: {_few(missing)}")
    duplicates = sorted(n for n, c in have.items() if c > 1)
    if duplicates:
        causes.append(f"several series for {_few(duplicates)} (the highest value is used)")
    if bad_values:
        causes.append(f"{bad_values} series are NaN or infinite (dropped)")
    if not causes:
        return Row(check, "ok", f"{len(have)} of {len(names)} nodes have data")
    if not have or (missing and metric.on_missing == "fail-closed"):
        status: Status = "FAIL"
        if have:
            causes.append("onMissing fail-closed filters these nodes out")
    else:
        status = "warn"
    return Row(check, status, "; ".join(causes))


def age_row(
    metric: MetricSettings, series: Sequence[Series], now: float, node_label: str = "node"
) -> Row:
    """Sample ages (`timestamp(<query>)` values) against the metric's maxAge."""
    check = f"age {metric.name}"
    ages = sorted(
        (now - s.value, s.labels.get(node_label) or "?") for s in series if math.isfinite(s.value)
    )
    if not ages:
        return Row(check, "warn", "no sample times (the timestamp() query returned nothing)")
    stale = [(age, where) for age, where in ages if age > metric.max_age]
    oldest, where = ages[-1]
    if ages[0][0] == oldest:
        span = f"sample age {oldest:.1f} s; maxAge {metric.max_age:g} s"
    else:
        span = f"newest {ages[0][0]:.1f} s, oldest {oldest:.1f} s ({where})"
        span += f"; maxAge {metric.max_age:g} s"
    if not stale:
        return Row(check, "ok", span)
    text = (
        f"{len(stale)} of {len(ages)} series older than maxAge, counted as missing: {span}; "
        "the exporter or recording rule stopped updating, or its scrape fails"
    )
    return Row(check, "FAIL" if len(stale) == len(ages) else "warn", text)


def range_row(metric: MetricSettings, values: Sequence[float]) -> Row:
    """Values against min..max of range normalisation (clamped outside it)."""
    check = f"range {metric.name}"
    if metric.normalize != "range":
        return Row(check, "ok", "normalised among the candidates (min/max unused)")
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return Row(check, "warn", "no values to compare with min..max")
    lo, hi = min(finite), max(finite)
    bounds = f"min {metric.min:g} .. max {metric.max:g}"
    seen = f"values {_number(lo)} .. {_number(hi)}"
    outside = [v for v in finite if v < metric.min or v > metric.max]
    if not outside:
        return Row(check, "ok", f"{seen} within {bounds}")
    hint = ""
    if metric.max <= 1 and hi > 1 and hi <= 100 and lo >= 0:
        hint = "; the values look like percent: set max: 100, or divide the query by 100"
    if len(outside) == len(finite):
        return Row(
            check,
            "FAIL",
            f"every value is outside {bounds} ({seen}): all nodes normalise alike, so the "
            f"metric cannot tell them apart{hint}",
        )
    return Row(
        check,
        "warn",
        f"{len(outside)} of {len(finite)} values outside {bounds} ({seen}), clamped{hint}",
    )


# --- Kubernetes ------------------------------------------------------------------------


def permissions(settings: Settings) -> list[Permission]:
    """What the policy needs of the API, and why (one entry per verb and resource)."""
    out = [
        Permission("list", "nodes", why="node addresses and sizes"),
        Permission("watch", "nodes", why="node addresses and sizes"),
    ]
    if settings.bind.enabled:
        out.append(Permission("create", "pods", subresource="binding", why="bind.enabled"))
    if settings.kubernetes.watch_pods:
        out.append(Permission("list", "pods", why="kubernetes.watchPods"))
        out.append(Permission("watch", "pods", why="kubernetes.watchPods"))
    if settings.requeue.enabled:
        out.append(Permission("patch", "pods", why="requeue.enabled"))
    if settings.explain.events:
        out.append(Permission("create", "events", group="events.k8s.io", why="explain.events"))
    out.append(
        Permission(
            "create",
            "pods",
            subresource="eviction",
            why="decice-extender rebalance in evict mode; the chart gives it to the "
            "rebalancer's own account",
            required=False,
        )
    )
    return out


def permission_row(permission: Permission, answer: tuple[bool, str] | BaseException) -> Row:
    check = f"rbac {permission.name}"
    if isinstance(answer, BaseException):
        return Row(check, "FAIL", f"cannot ask (SelfSubjectAccessReview): {describe(answer)}")
    allowed, reason = answer
    if allowed:
        return Row(check, "ok", f"allowed ({permission.why})")
    because = f" ({reason})" if reason else ""
    return Row(
        check,
        "FAIL" if permission.required else "warn",
        f"denied{because}: {permission.why} needs it; grant it to the extender's account",
    )


def nodes_row(nodes: Sequence[NodeInfo] | BaseException) -> Row:
    if isinstance(nodes, BaseException):
        return Row("kubernetes", "FAIL", f"cannot list nodes: {describe(nodes)}")
    if not nodes:
        return Row("kubernetes", "FAIL", "the API lists no nodes")
    without = [n.name for n in nodes if not n.internal_ips]
    if without:
        return Row(
            "kubernetes",
            "warn",
            f"{len(nodes)} nodes; without InternalIP (no `instance` mapping): {_few(without)}",
        )
    return Row("kubernetes", "ok", f"{len(nodes)} nodes listed")


# --- the whole run ---------------------------------------------------------------------


def timestamp_query(query: str) -> str:
    """The PromQL of each sample's time. For a plain selector that is when it was
    scraped; an expression's result (an aggregation, a join) carries the query time."""
    return f"timestamp({query})"


async def examine(
    settings: Settings,
    query: Query | None,
    kube: Kube | None,
    kube_problem: str | None = None,
    clock: Callable[[], float] = time.time,
) -> list[Row]:
    """Every check of the policy, in order. `query` None: the static provider."""
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
        rows.extend(await _prometheus_rows(settings, query, nodes, clock))
    if kube is not None:
        for permission in permissions(settings):
            answer: tuple[bool, str] | BaseException
            try:
                answer = await kube.access_review(
                    permission.verb,
                    permission.resource,
                    group=permission.group,
                    subresource=permission.subresource,
                )
            except Exception as exc:
                answer = exc
            rows.append(permission_row(permission, answer))
    return rows


async def _prometheus_rows(
    settings: Settings, query: Query, nodes: list[NodeInfo] | None, clock: Callable[[], float]
) -> list[Row]:
    async def ask(promql: str) -> list[Series] | BaseException:
        try:
            return parse_series(await asyncio.to_thread(query, promql))
        except Exception as exc:
            return exc

    reached = await ask("vector(1)")
    error = reached if isinstance(reached, BaseException) else None
    rows = [reachable_row(settings.prometheus, error)]
    if error is not None:
        return rows
    users: dict[str, list[str]] = {}
    for name, policy in settings.policy_map.items():
        for m in policy.metrics:
            users.setdefault(m.name, []).append(name)
    for metric in settings.fetched_metrics:
        series = await ask(metric.query)
        row = query_row(metric, series)
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
    return rows


def render(rows: Sequence[Row]) -> str:
    """CHECK, STATUS, DETAIL, then a one-line summary."""
    table = tabulate(
        [[r.check, r.status, r.detail] for r in rows],
        headers=["CHECK", "STATUS", "DETAIL"],
        tablefmt="plain",
        disable_numparse=True,
    )
    failed = sum(r.status == "FAIL" for r in rows)
    warned = sum(r.status == "warn" for r in rows)
    summary = f"{failed} FAIL, {warned} warn, {len(rows) - failed - warned} ok"
    return f"{table}\n\n{summary}"


def exit_code(rows: Iterable[Row]) -> int:
    return 1 if any(r.status == "FAIL" for r in rows) else 0
