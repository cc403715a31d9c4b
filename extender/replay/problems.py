"""Why a replay cannot run, in one message each: the command prints it and exits non-zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from extender.policy.windows import duration
from extender.replay.queries import SETTINGS


class ReplayProblem(Exception):
    """A bad input; `str()` is the whole message for the operator."""


class Unreachable(ReplayProblem):
    pass


class Refused(ReplayProblem):
    """The server answered 401 or 403."""


class NoData(ReplayProblem):
    pass


class MissingSeries(ReplayProblem):
    pass


class TooLarge(ReplayProblem):
    pass


class BeyondRetention(ReplayProblem):
    pass


def when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%MZ")


def unreachable(url: str, cause: str) -> Unreachable:
    return Unreachable(f"cannot query {url}: {cause}")


def refused(url: str, status: int, auth: str, policy: str) -> Refused:
    return Refused(
        f"{url} refused the query (HTTP {status}) with {auth}: check the prometheus "
        f"section of {policy} (bearerTokenFile, basicAuth, headerFiles, tenant)"
    )


LABELS = {
    "uid": "pods are told apart by namespace, pod and uid; kube-state-metrics puts uid on "
    "every pod series from v2.1 on (before, on kube_pod_info only): upgrade it, or drop the "
    "metricRelabelings that remove it",
    **dict.fromkeys(
        ("namespace", "pod"),
        "which pod: kube-state-metrics' target needs honorLabels: true, or its namespace and "
        "pod become exported_namespace and exported_pod",
    ),
    "node": "which node (on kube_pod_info: where each pod ran; without it every pod looks "
    "Pending): check metricRelabelings",
    "resource": "which resource: check metricRelabelings",
    "name": "which scheduler: check metricRelabelings",
    "internal_ip": "the node's address, for prometheus.nodeLabel: instance",
    "workload": "the pod's workload: check the rule's expression",
}
"""A label the replay keys on -> what it tells and where it goes missing."""


def missing(
    names: Sequence[tuple[str, str]],
    start: float,
    end: float,
    lacking: Sequence[tuple[str, str, bool]] = (),
) -> MissingSeries:
    """`lacking` first: a missing label may be why a rule built on it records nothing."""
    span = f"between {when(start)} and {when(end)}"
    parts = []
    if lacking:
        grouped: dict[tuple[str, bool], list[str]] = {}
        for series, label, everywhere in lacking:
            grouped.setdefault((label, everywhere), []).append(series)
        lines = [
            f"  no {label} label on {'any' if everywhere else 'some'} series of "
            f"{', '.join(names)}: {LABELS.get(label, 'check metricRelabelings')}"
            for (label, everywhere), names in grouped.items()
        ]
        parts.append(f"series without a label the replay keys on, {span}:\n" + "\n".join(lines))
    if names:
        unknown = "not a kube-prometheus-stack series: check the query"
        lines = [f"  {s} ({use}): recorded by {SETTINGS.get(s, unknown)}" for s, use in names]
        parts.append(f"series missing {span}:\n" + "\n".join(lines))
    return MissingSeries("\n".join(parts))


def unnamed_nodes(labels: Mapping[str, str], node_label: str) -> MissingSeries:
    """The policy's CPU query answered, but no series named a node."""
    shown = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return MissingSeries(
        f"the policy's cpu query answers series that name no node by prometheus.nodeLabel "
        f"({node_label}), e.g. {{{shown}}}: keep the label in the query (e.g. "
        f"max by ({node_label}) (...)), or set prometheus.nodeLabel to the label naming nodes"
    )


def no_data(start: float, end: float, url: str) -> NoData:
    return NoData(
        f"no data between {when(start)} and {when(end)} at {url}: kube_node_status_allocatable "
        "has no samples there (is this the cluster's Prometheus, and the range right? "
        "times are UTC)"
    )


def retention_seconds(text: str | None) -> float | None:
    """The time part of a retention ("15d", "10d or 50GiB", VictoriaMetrics' "12M"), or None."""
    if not text:
        return None
    return duration(text.split(" or ")[0].strip())


def beyond_retention(start: float, retention: str | None, now: float) -> BeyondRetention | None:
    """A problem when the server's retention no longer holds `start`, else None."""
    seconds = retention_seconds(retention)
    if seconds is None or start >= now - seconds:
        return None
    return BeyondRetention(
        f"the range starts {when(start)}, but the server keeps {retention} (data from "
        f"{when(now - seconds)} on): use --from {when(now - seconds)} or later"
    )


def too_large(needed: float, limit: float, detail: str, suggestion: str) -> TooLarge:
    return TooLarge(
        f"the range needs about {gib(needed)} of memory ({detail}), over the limit of "
        f"{gib(limit)} (--max-memory): {suggestion}"
    )


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
