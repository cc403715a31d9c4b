"""The doctor's Prometheus checks, pure: is it reachable with the policy's auth, does each
query return series, do they map to the cluster's nodes, are their samples younger than
maxAge, do their values fall inside min..max?"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.decisions.model import NodeInfo, NodeInventory
from extender.doctor.rows import Row, Status, few
from extender.errors.causes import describe
from extender.metrics.providers import node_of
from extender.metrics.usage import sample_value
from extender.policy.backend import PrometheusSettings
from extender.policy.policies import MetricSettings

#: A blocking instant query: `data.result` as Prometheus sent it; raises on failure.
Query = Callable[[str], Sequence[Any]]
_JOIN = re.compile(r"\b(on|ignoring|group_left|group_right)\s*\(|\b(and|unless)\b")


@dataclass(frozen=True, slots=True)
class Series:
    """One series of an instant-vector answer: its labels and value."""

    labels: Mapping[str, str]
    value: float


def parse_series(result: Sequence[Any]) -> list[Series]:
    """An instant-vector `data.result` as Series; items that are not series are left out,
    values that are not numbers become NaN."""
    return [
        Series({str(k): str(v) for k, v in (item.get("metric") or {}).items()}, sample_value(item))
        for item in result
        if isinstance(item, dict) and isinstance(item.get("metric", {}), dict)
    ]


def auth_text(prometheus: PrometheusSettings) -> str:
    """How we authenticate to Prometheus, for the reachability row (never a secret)."""
    p = prometheus
    parts = (
        p.bearer_token_file and f"bearer token from {p.bearer_token_file}",
        p.basic_auth and f"basic auth as {p.basic_auth.username}",
        p.tenant is not None and f"tenant {p.tenant}",
        p.headers and f"headers {few(p.headers, 5)}",
        *(f"{name} from {path}" for name, path in sorted(p.header_files.items())),
        p.ca_file and f"CA {p.ca_file}",
        p.insecure_skip_verify and "TLS not verified",
    )
    return "; ".join(part for part in parts if isinstance(part, str) and part) or "no auth"


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


def mapping_row(
    metric: MetricSettings, series: Sequence[Series], nodes: Sequence[NodeInfo], node_label: str
) -> Row:
    """Which nodes have data, which do not, which series map to no node, and why."""
    check = f"nodes {metric.name}"
    inventory = NodeInventory.from_nodes(list(nodes))
    names = {n.name for n in nodes}
    unlabelled: list[Series] = []
    unknown: list[str] = []
    have: Counter[str] = Counter()
    bad_values = 0
    for s in series:
        node = node_of(s.labels, node_label, inventory)
        if node is None:
            unlabelled.append(s)
        elif node not in names:
            unknown.append(s.labels.get(node_label, node))
        else:
            have[node] += 1
            bad_values += not math.isfinite(s.value)
    missing = names - set(have)
    causes: list[str] = []
    if unlabelled:
        others = {k for s in unlabelled for k in s.labels if k != "__name__"}
        text = (
            f"{len(unlabelled)} of {len(series)} series have no {node_label!r} label "
            f"(prometheus.nodeLabel wrong?); their labels: {', '.join(sorted(others)) or 'none'}"
        )
        # A label (other than `instance`) whose values are node names, if a series has one.
        holders = Counter(
            label
            for s in unlabelled
            for label, value in s.labels.items()
            if label not in ("instance", "__name__") and value in names
        )
        if holders:
            better = max(sorted(holders), key=holders.__getitem__)
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
            f"instance {few(unknown)} match no node InternalIP "
            f"(the nodes have {few(ips) or 'no InternalIP'}): another network, or a "
            "NodePort/proxy address"
        )
    elif unknown:
        causes.append(
            f"{len(unknown)} series name nodes the API does not list: {few(unknown)} "
            "(another cluster, or a label holding something else than the node name)"
        )
    if missing and have and len(series) < len(names):
        join = " (a join in the query drops them)" if _JOIN.search(metric.query) else ""
        causes.append(f"the query returns {len(series)} series for {len(names)} nodes{join}")
    if missing:
        causes.insert(0, f"no data for {len(missing)} of {len(names)} nodes: {few(missing)}")
    duplicates = sorted(n for n, c in have.items() if c > 1)
    if duplicates:
        causes.append(f"several series for {few(duplicates)} (the highest value is used)")
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
    seen = f"values {lo:.4g} .. {hi:.4g}"
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
