"""The facts a replay needs, folded chunk by chunk from range-query answers.

Each answer is a Prometheus matrix (`[{"metric": {labels}, "values": [[t, "v"], ...]}]`),
read once and dropped: what stays is compact (a float32 per node and step for node CPU,
per replayed pod and step of its life for its use, a few numbers per pod). Two kinds of
input:

- fine series, at the grid's step: node CPU (the policy's query) and each replayed pod's
  measured use (the stock per-container rule, summed per pod);
- window series, `max_over_time(...[W])` answered every W: what kube-state-metrics says
  of pods and nodes. Their values carry exact times (creation, start, completion,
  deletion), so a coarse window loses nothing but the moment a pod's series ends, which
  is used only when no time says it: kube_pod_info is counted per window instead, and
  the samples in the last window its series was seen say how long into that window the
  pod was still there, to within a scrape.

Pure: no I/O.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.replay.keys import TIMES, KeyLabels
from extender.replay.model import Grid

Labels = Mapping[str, str]
NAN = math.nan

# Tolerations the API server's admission adds to every pod (DefaultTolerationSeconds):
# they say nothing about where a pod may go.
DEFAULT_TOLERATIONS = frozenset(
    {"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute"}
)
TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def samples(series: Mapping[str, Any]) -> Iterable[tuple[float, float]]:
    """(time, value) of one series of a matrix, non-numbers and NaN/Inf left out."""
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


def last_value(series: Mapping[str, Any]) -> float | None:
    """The series' latest value (None: it has none)."""
    found = None
    for _, value in samples(series):
        found = value
    return found


def labels_of(series: Mapping[str, Any]) -> Labels:
    labels = series.get("metric")
    return labels if isinstance(labels, dict) else {}


@dataclass(slots=True)
class Trace:
    """One series at the grid's step, kept from its first step on (NaN: no value)."""

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
    """Utilisation 0..1 per step, as the policy's CPU query answers."""
    taints: set[str] = field(default_factory=set)


@dataclass(slots=True)
class PodFacts:
    namespace: str
    name: str
    uid: str
    nodes: dict[str, float] = field(default_factory=dict)
    """node -> the first window it was seen bound there."""
    first_seen: float = math.inf
    """Window bounds of any kube_pod_info series: (first - W, last]."""
    last_seen: float = -math.inf
    tail: tuple[float, float] | None = None
    """(the last window its kube_pod_info series with a node was seen in, its samples
    there): where its end falls when no time says it."""
    created: float | None = None
    started: float | None = None
    scheduled: float | None = None
    completed: float | None = None
    deleted: float | None = None
    cpu: float = 0.0
    """Cores requested (sum over containers; the highest seen)."""
    memory: float = 0.0
    created_by: str = ""
    workload: str | None = None
    workload_type: str = ""
    scheduler: str | None = None
    selectors: tuple[str, ...] = ()
    tolerations: set[str] = field(default_factory=set)

    @property
    def node(self) -> str | None:
        """The node it ran on: the first one it was seen bound to."""
        return min(self.nodes, key=lambda n: self.nodes[n]) if self.nodes else None


class Facts:
    """Everything folded so far; `seen` names the inputs that answered with any series."""

    def __init__(self, grid: Grid, window: float, scrape: float = 30.0) -> None:
        self.grid = grid
        self.window = window
        self.scrape = scrape
        """Seconds between kube-state-metrics' scrapes: what a kube_pod_info sample spans."""
        self.nodes: dict[str, NodeFacts] = {}
        self.pods: dict[tuple[str, str, str], PodFacts] = {}
        self._by_name: dict[tuple[str, str], list[PodFacts]] = {}
        self.usage: dict[tuple[str, str], Trace] = {}
        """(namespace, pod) -> its measured use in cores (pods created in the range)."""
        self.seen: set[str] = set()
        self.ips: dict[str, str] = {}
        """InternalIP -> node, for policies whose CPU query names nodes by `instance`."""
        self.keys = KeyLabels()  # the labels telling series apart: had, or lacked
        self.unnamed: Labels | None = None
        """The labels of a node CPU series no node could be named from (the first seen)."""

    # --- keys
    def node(self, name: str) -> NodeFacts:
        found = self.nodes.get(name)
        if found is None:
            found = self.nodes[name] = NodeFacts(name)
        return found

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
    def fold_allocatable(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("allocatable", labels)
            name = labels.get("node")
            last = last_value(series)
            if not name or last is None:
                continue
            node, resource = self.node(name), labels.get("resource")
            if resource == "cpu":
                node.cores = last
            elif resource == "memory":
                node.memory = int(last)
            elif resource == "pods":
                node.max_pods = int(last)
            self.seen.add("allocatable")

    def fold_node_info(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("node_info", labels)
            if labels.get("node") and labels.get("internal_ip"):
                self.ips[labels["internal_ip"]] = labels["node"]

    def fold_pod_info(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("pod_info", labels)
            pod = self.pod(labels)
            if pod is None:
                continue
            points = list(samples(series))
            if not points:
                continue
            self.seen.add("pod_info")
            pod.first_seen = min(pod.first_seen, points[0][0] - self.window)
            pod.last_seen = max(pod.last_seen, points[-1][0])
            node = labels.get("node", "")
            if node:
                self.keys.bound()
                pod.nodes[node] = min(pod.nodes.get(node, math.inf), points[0][0])
                if pod.tail is None or points[-1] > pod.tail:
                    pod.tail = points[-1]
            if labels.get("created_by_kind"):
                pod.created_by = labels["created_by_kind"]

    def fold_time(self, what: str, result: list[Any]) -> None:
        """A pod timestamp (kube_pod_created, _start_time, ...): its latest value."""
        assert what in TIMES, what
        for series in result:
            labels = labels_of(series)
            self.keys.note(what, labels)
            pod = self.pod(labels)
            value = last_value(series)
            if pod is not None and value is not None and value > 0:
                setattr(pod, what, value)
                self.seen.add(what)

    def fold_requests(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("requests", labels)
            pod = self.pod(labels)
            values = [v for _, v in samples(series)]
            if pod is None or not values:
                continue
            self.seen.add("requests")
            if labels.get("resource") == "cpu":
                pod.cpu = max(pod.cpu, max(values))
            elif labels.get("resource") == "memory":
                pod.memory = max(pod.memory, max(values))

    def fold_owners(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("owners", labels)
            if not labels.get("workload") or not any(True for _ in samples(series)):
                continue
            self.seen.add("owners")
            kind = labels.get("workload_type", "").lower()
            for pod in self.named(labels):
                pod.workload_type = kind
                pod.workload = f"{kind} {labels.get('namespace')}/{labels['workload']}"

    def fold_scheduler(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("scheduler", labels)
            pod = self.pod(labels)
            if pod is not None and labels.get("name") and any(True for _ in samples(series)):
                pod.scheduler = labels["name"]
                self.seen.add("scheduler")

    def fold_selectors(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("selectors", labels)
            pod = self.pod(labels)
            if pod is None or not any(True for _ in samples(series)):
                continue
            self.seen.add("selectors")
            keys = sorted(
                k.removeprefix("nodeselector_") for k in labels if k.startswith("nodeselector_")
            )
            if keys:
                pod.selectors = tuple(keys)

    def fold_tolerations(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("tolerations", labels)
            pod = self.pod(labels)
            if pod is None or not any(True for _ in samples(series)):
                continue
            self.seen.add("tolerations")
            text = f"{labels.get('key') or '*'}:{labels.get('effect') or '*'}"
            if text not in DEFAULT_TOLERATIONS:
                pod.tolerations.add(text)

    def fold_taints(self, result: list[Any]) -> None:
        for series in result:
            labels = labels_of(series)
            self.keys.note("taints", labels)
            name, effect = labels.get("node"), labels.get("effect", "")
            if name and effect in TAINT_EFFECTS and any(True for _ in samples(series)):
                self.node(name).taints.add(f"{labels.get('key', '')}:{effect}")
                self.seen.add("taints")

    # --- fine inputs
    def fold_node_cpu(self, result: list[Any], node_of: Callable[[Labels], str | None]) -> None:
        """The policy's CPU query; duplicates of one node keep the highest value, as the
        extender does."""
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
            trace = self.usage.get(key)
            if trace is None:
                trace = Trace(self.grid.steps)
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
    """A series' samples into `trace` at their steps (the hot loop of a week's fetch:
    samples that continue the trace are appended). True when any sample landed."""
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
