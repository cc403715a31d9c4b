"""The facts a replay needs, folded chunk by chunk from range-query answers. Pure.

Each answer is read once and dropped: what stays is float32 per node and step (node CPU)
and per replayed pod and step (its use), and a few numbers per pod from the window series.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.replay.model import Grid

Labels = Mapping[str, str]
NAN = math.nan

TIMES = ("created", "started", "scheduled", "completed", "deleted")
POD = ("namespace", "pod", "uid")
KEYS: dict[str, tuple[str, ...]] = {
    "allocatable": ("node", "resource"),
    "node_info": ("node", "internal_ip"),
    "taints": ("node",),
    "pod_info": POD,
    **dict.fromkeys(TIMES, POD),
    "requests": (*POD, "resource"),
    "scheduler": (*POD, "name"),
    "selectors": POD,
    "tolerations": POD,
    "owners": ("namespace", "pod", "workload"),
}
"""A window input's key -> the labels its series are told apart by."""


class KeyLabels:
    """The labels series had and lacked: without `uid` (kube-state-metrics before v2.1,
    kubernetes/kube-state-metrics#1304) one pod becomes two; the collector names each."""

    def __init__(self) -> None:
        self.had: dict[str, set[str]] = {}
        self.lacked: dict[str, set[str]] = {}

    def note(self, key: str, labels: Mapping[str, str]) -> None:
        for label in KEYS[key]:
            into = self.had if labels.get(label) else self.lacked
            into.setdefault(key, set()).add(label)

    def lacking(self) -> list[tuple[str, str, bool]]:
        """(input key, label, on every series) of each label lacked."""
        out = [
            (key, label, label not in self.had.get(key, set()))
            for key, labels in KEYS.items()
            for label in labels
            if label in self.lacked.get(key, set())
        ]
        folded = "pod_info" in self.lacked or "pod_info" in self.had
        if folded and "node" not in self.had.get("pod_info", set()):
            out.append(("pod_info", "node", True))
        return out


# DefaultTolerationSeconds admission adds these to every pod: they tell nothing.
DEFAULT_TOLERATIONS = frozenset(
    {"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute"}
)
TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def samples(series: Mapping[str, Any]) -> Iterable[tuple[float, float]]:
    """(time, value) of one series of a matrix, finite numbers only."""
    values = series.get("values")
    if not isinstance(values, list):
        return
    for pair in values:
        try:
            t, v = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(v):
            yield t, v


def labels_of(series: Mapping[str, Any]) -> Labels:
    labels = series.get("metric")
    return labels if isinstance(labels, dict) else {}


@dataclass(slots=True)
class Trace:
    """One series at the grid's step, from its first step on (NaN: no value)."""

    first: int
    values: array[float] = field(default_factory=lambda: array("f"))

    def put(self, k: int, value: float) -> None:
        if k < self.first:  # an earlier chunk came late: grow at the front
            self.values[0:0] = array("f", [NAN]) * (self.first - k)
            self.first = k
        i = k - self.first
        if i >= len(self.values):
            self.values.extend(array("f", [NAN]) * (i - len(self.values) + 1))
        self.values[i] = value

    def at(self, k: int) -> float:
        i = k - self.first
        return self.values[i] if 0 <= i < len(self.values) else NAN

    @property
    def last(self) -> int:
        return self.first + len(self.values) - 1


@dataclass(slots=True)
class NodeFacts:
    name: str
    cores: float | None = None
    memory: int = 0
    max_pods: int = 110
    cpu: Trace | None = None
    taints: set[str] = field(default_factory=set)


@dataclass(slots=True)
class PodFacts:
    namespace: str
    name: str
    uid: str
    nodes: dict[str, float] = field(default_factory=dict)
    """node -> the first window it was seen bound there."""
    first_seen: float = math.inf
    last_seen: float = -math.inf
    tail: tuple[float, float] | None = None
    """(the last window kube_pod_info saw it bound, its samples there): where it ended."""
    created: float | None = None
    started: float | None = None
    scheduled: float | None = None
    completed: float | None = None
    deleted: float | None = None
    cpu: float = 0.0  # cores requested (summed over containers, the highest seen)
    memory: float = 0.0
    created_by: str = ""
    workload: str | None = None
    workload_type: str = ""
    scheduler: str | None = None
    selectors: tuple[str, ...] = ()
    tolerations: set[str] = field(default_factory=set)

    @property
    def node(self) -> str | None:
        return min(self.nodes, key=lambda n: self.nodes[n]) if self.nodes else None


class Facts:
    """Everything folded so far; `seen` names the inputs that told something."""

    def __init__(self, grid: Grid, window: float, scrape: float = 30.0) -> None:
        self.grid = grid
        self.window = window
        self.scrape = scrape  # what a kube_pod_info sample spans
        self.nodes: dict[str, NodeFacts] = {}
        self.pods: dict[tuple[str, str, str], PodFacts] = {}
        self._by_name: dict[tuple[str, str], list[PodFacts]] = {}
        self.usage: dict[tuple[str, str], Trace] = {}
        self.seen: set[str] = set()
        self.ips: dict[str, str] = {}  # InternalIP -> node, for prometheus.nodeLabel: instance
        self.keys = KeyLabels()  # the labels telling series apart: had, or lacked
        self.unnamed: Labels | None = None  # the first node CPU series naming no node

    # --- keys
    def node(self, name: str) -> NodeFacts:
        return self.nodes.get(name) or self.nodes.setdefault(name, NodeFacts(name))

    def pod(self, labels: Labels) -> PodFacts | None:
        ns, name, uid = labels.get("namespace"), labels.get("pod"), labels.get("uid", "")
        if not ns or not name:
            return None
        key = (ns, name, uid)
        found = self.pods.get(key)
        if found is None:
            found = self.pods[key] = PodFacts(ns, name, uid)
            self._by_name.setdefault((ns, name), []).append(found)
        return found

    def named(self, labels: Labels) -> list[PodFacts]:
        """Every incarnation of the pod a uid-less series (a recording rule) names."""
        return self._by_name.get((labels.get("namespace", ""), labels.get("pod", "")), [])

    # --- window inputs
    def fold(self, key: str, result: list[Any]) -> None:
        """One window answer, by its input's key (queries.Input.key)."""
        for series in result:
            labels = labels_of(series)
            self.keys.note(key, labels)
            if any(True for _ in samples(series)) and self._fold(key, labels, series):
                self.seen.add(key)

    def _fold(self, key: str, labels: Labels, series: Mapping[str, Any]) -> bool:
        """One series with samples; True when it told something."""
        if key == "allocatable" or key in TIMES:
            *_, (_, last) = samples(series)  # fold() passes series with samples only
            if key == "allocatable":
                return self._allocatable(labels, last)
            pod = self.pod(labels)
            if pod is None or last <= 0:
                return False
            setattr(pod, key, last)  # a timestamp: its latest value
            return True
        if key == "node_info":
            if labels.get("node") and labels.get("internal_ip"):
                self.ips[labels["internal_ip"]] = labels["node"]
                return True
            return False
        if key == "taints":
            name, effect = labels.get("node"), labels.get("effect", "")
            if name and effect in TAINT_EFFECTS:
                self.node(name).taints.add(f"{labels.get('key', '')}:{effect}")
                return True
            return False
        if key == "owners":
            if not labels.get("workload"):
                return False
            kind = labels.get("workload_type", "").lower()
            for found in self.named(labels):
                found.workload_type = kind
                found.workload = f"{kind} {labels.get('namespace')}/{labels['workload']}"
            return True
        pod = self.pod(labels)
        if pod is None:
            return False
        if key == "pod_info":
            self._pod_info(pod, labels, list(samples(series)))
        elif key == "requests":
            top = max(v for _, v in samples(series))
            if labels.get("resource") == "cpu":
                pod.cpu = max(pod.cpu, top)
            elif labels.get("resource") == "memory":
                pod.memory = max(pod.memory, top)
        elif key == "scheduler":
            if not labels.get("name"):
                return False
            pod.scheduler = labels["name"]
        elif key == "selectors":
            keys = sorted(
                k.removeprefix("nodeselector_") for k in labels if k.startswith("nodeselector_")
            )
            pod.selectors = tuple(keys) or pod.selectors
        elif key == "tolerations":
            text = f"{labels.get('key') or '*'}:{labels.get('effect') or '*'}"
            if text not in DEFAULT_TOLERATIONS:
                pod.tolerations.add(text)
        return True

    def _allocatable(self, labels: Labels, last: float) -> bool:
        name, resource = labels.get("node"), labels.get("resource")
        if not name:
            return False
        node = self.node(name)
        if resource == "cpu":
            node.cores = last
        elif resource == "memory":
            node.memory = int(last)
        elif resource == "pods":
            node.max_pods = int(last)
        return True

    def _pod_info(self, pod: PodFacts, labels: Labels, points: list[tuple[float, float]]) -> None:
        pod.first_seen = min(pod.first_seen, points[0][0] - self.window)
        pod.last_seen = max(pod.last_seen, points[-1][0])
        node = labels.get("node", "")
        if node:
            self.keys.had.setdefault("pod_info", set()).add("node")  # a series named a node
            pod.nodes[node] = min(pod.nodes.get(node, math.inf), points[0][0])
            if pod.tail is None or points[-1] > pod.tail:
                pod.tail = points[-1]
        if labels.get("created_by_kind"):
            pod.created_by = labels["created_by_kind"]

    # --- fine inputs
    def fold_node_cpu(self, result: list[Any], node_of: Callable[[Labels], str | None]) -> None:
        """The policy's CPU query; duplicates of a node keep the highest, as the extender."""
        for series in result:
            labels = labels_of(series)
            name = node_of(labels)
            if name is None:
                if self.unnamed is None:
                    self.unnamed = labels
                continue
            node = self.node(name)
            if node.cpu is None:
                node.cpu = Trace(self.grid.steps)  # moved to its first step by the first put
            if fold_trace(node.cpu, series, self.grid, keep_highest=True):
                self.seen.add("node_cpu")

    def fold_usage(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if not all(key):
                continue
            trace = self.usage.get(key) or Trace(self.grid.steps)
            if fold_trace(trace, series, self.grid, keep_highest=False, floor=0.0):
                self.usage[key] = trace
                self.seen.add("usage")


def fold_trace(
    trace: Trace,
    series: Mapping[str, Any],
    grid: Grid,
    keep_highest: bool,
    floor: float = -math.inf,
) -> bool:
    """A series' samples into `trace` at their steps (a week's hot loop); True if any landed."""
    values = series.get("values")
    if not isinstance(values, list):
        return False
    start, step, steps = grid.start, grid.step, grid.steps
    landed = False
    for pair in values:
        try:
            k = round((float(pair[0]) - start) / step)
            v = float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        if not 0 <= k < steps or not math.isfinite(v):
            continue
        v = max(floor, v)
        if trace.values and k == trace.first + len(trace.values):
            trace.values.append(v)
        elif not trace.values:
            trace.first = k
            trace.values.append(v)
        else:
            old = trace.at(k)
            trace.put(k, v if not keep_highest or math.isnan(old) else max(old, v))
        landed = True
    return landed
