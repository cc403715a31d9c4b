"""A small cluster's past, written as its exporters would have exposed it (OpenMetrics).

A test describes nodes (cores, an IP, unseen background load over time) and pods
(created, bound to a node or never, running from a start to an end, requesting and using
CPU, owned by a ReplicaSet of a Deployment, a DaemonSet, or nothing, placed by some
scheduler), and `ClusterHistory.openmetrics()` writes what a stock kube-prometheus-stack
would have scraped every `scrape` seconds:

* node-exporter: `node_cpu_seconds_total{job="node-exporter", instance="<ip>:9100", cpu,
  mode, ...}` counters (two cpus, each busy the node's share of the time), with the
  labels prometheus-operator's ServiceMonitor gives them (no `node` label);
* kube-state-metrics (`job="kube-state-metrics"`): kube_node_status_allocatable,
  kube_node_info, kube_pod_info (`node=""` while Pending), kube_pod_created,
  kube_pod_start_time, kube_pod_status_scheduled_time, kube_pod_completion_time,
  kube_pod_deletion_timestamp (while a deleted pod terminates),
  kube_pod_container_resource_requests, kube_pod_owner, kube_replicaset_owner,
  kube_pod_scheduler, with kube-state-metrics' label names
  (docs/metrics/workload/pod-metrics.md);
* cAdvisor through the kubelet (`job="kubelet", metrics_path="/metrics/cadvisor"`):
  `container_cpu_usage_seconds_total{namespace, pod, container, image, node}` counters.

The stock recording rules are not written here: the servers compute them over this
history (tests.harness.backfill). A node asked for more than its cores serves everyone
on it in proportion (pods' counters then grow by their use times that share), as a real
CPU-starved node does. Everything is a pure function of the description: no clock, no
randomness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

GIB = 1024**3
KSM = {"job": "kube-state-metrics", "instance": "10.1.0.5:8080"}
CPUS = 2
BUSY = {"user": 0.75, "system": 0.25}
IDLE = {"idle": 0.8, "iowait": 0.1, "steal": 0.1}


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cores: float
    ip: str
    background: tuple[tuple[float, float], ...] = ((0.0, 0.2),)
    """(from time, share of its cores busy with work no scheduler sees), in time order."""
    memory: int = 16 * GIB
    max_pods: int = 110

    def unseen(self, t: float) -> float:
        level = self.background[0][1]
        for since, value in self.background:
            if t >= since:
                level = value
        return level * self.cores


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    created: float
    cpu: float
    """Cores requested (0: none)."""
    use: float
    """Cores used while it runs (before any starving of its node)."""
    node: str | None = None
    """Where it ran (None: never bound, Pending throughout)."""
    bound: float | None = None
    start: float | None = None
    end: float | None = None
    """When it stopped (None: still running when the history ends)."""
    completed: bool = False
    """It finished (a Job's pod: its object stays `linger` seconds); else it was deleted."""
    memory: int = 256 * 1024**2
    owner_kind: str = "ReplicaSet"
    owner_name: str = ""
    deployment: str = ""
    """The Deployment that made its ReplicaSet ("" for other owners)."""
    scheduler: str = "default-scheduler"
    uid: str = ""
    linger: float = 600.0
    grace: float = 0.0
    """Seconds a deleted pod's object stays terminating after its containers stopped at
    `end` (kube_pod_deletion_timestamp says `end` meanwhile): 0, gone at once."""

    def __post_init__(self) -> None:
        if not self.uid:
            self.uid = f"uid-{self.namespace}-{self.name}"

    def exists(self, t: float) -> bool:
        """Its API object exists at t (what kube-state-metrics reports)."""
        if t < self.created:
            return False
        if self.end is None:
            return True
        return t < self.end + (self.linger if self.completed else self.grace)

    def running(self, t: float) -> bool:
        return (
            self.node is not None
            and self.start is not None
            and self.start <= t
            and (self.end is None or t < self.end)
        )


@dataclass
class ClusterHistory:
    start: float
    end: float
    nodes: list[Node]
    pods: list[Pod] = field(default_factory=list)
    scrape: float = 30.0
    trimmed: dict[str, frozenset[str]] = field(default_factory=dict)
    """kube-state-metrics series -> labels it goes without, as an older kube-state-metrics
    or a metricRelabelings labeldrop writes it; a series trimmed of "__name__" is left
    out whole."""

    def times(self) -> list[float]:
        n = int((self.end - self.start) // self.scrape) + 1
        return [self.start + i * self.scrape for i in range(n)]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def demand(self, node: Node, t: float) -> float:
        """Cores asked of the node at t: unseen work plus its running pods' use."""
        return node.unseen(t) + sum(
            p.use for p in self.pods if p.node == node.name and p.running(t)
        )

    def served(self, node: Node, t: float) -> float:
        d = self.demand(node, t)
        return 1.0 if d <= node.cores else node.cores / d

    def utilisation(self, node: Node, t: float) -> float:
        """The truth: the node's CPU busy share at t (0..1)."""
        return min(1.0, self.demand(node, t) / node.cores)

    def demands(self) -> dict[str, list[float]]:
        """`demand` of every node at every scrape time, in one pass over the pods."""
        times = self.times()
        used = {n.name: [0.0] * len(times) for n in self.nodes}
        for pod in self.pods:
            if pod.node is None or pod.start is None:
                continue
            row = used[pod.node]
            for i, t in enumerate(times):
                if pod.running(t):
                    row[i] += pod.use
        return {
            n.name: [n.unseen(t) + u for t, u in zip(times, used[n.name], strict=True)]
            for n in self.nodes
        }

    # --- OpenMetrics
    def openmetrics(self) -> str:
        demands = self.demands()
        families = [
            self._node_cpu(demands),
            self._gauges("kube_node_status_allocatable", self._allocatable()),
            self._gauges("kube_node_info", self._node_info()),
            self._gauges("kube_pod_info", self._pod_info()),
            *(self._gauges(name, self._pod_times(name)) for name in POD_TIMES),
            self._gauges("kube_pod_container_resource_requests", self._requests()),
            self._gauges("kube_pod_owner", self._owners()),
            self._gauges("kube_replicaset_owner", self._replicasets()),
            self._gauges("kube_pod_scheduler", self._schedulers()),
            self._container_cpu(demands),
        ]
        return "".join(families) + "# EOF\n"

    def _gauges(
        self, name: str, series: Iterable[tuple[dict[str, str], list[tuple[float, float]]]]
    ) -> str:
        dropped = self.trimmed.get(name, frozenset())
        if "__name__" in dropped:
            return ""
        out = [f"# TYPE {name} gauge\n"]
        for labels, points in series:
            text = _labels({k: v for k, v in labels.items() if k not in dropped})
            out += [f"{name}{text} {_value(v)} {t:.3f}\n" for t, v in points]
        return "".join(out) if len(out) > 1 else ""

    def _node_cpu(self, demands: dict[str, list[float]]) -> str:
        out = ["# TYPE node_cpu_seconds counter\n"]
        times = self.times()
        for node in self.nodes:
            busy = idle = 0.0
            samples: list[tuple[float, float, float]] = []
            for i, t in enumerate(times):
                if i:
                    u = min(1.0, demands[node.name][i - 1] / node.cores)
                    busy += u * self.scrape
                    idle += (1 - u) * self.scrape
                samples.append((t, busy, idle))
            for cpu in range(CPUS):
                for mode, share in (*BUSY.items(), *IDLE.items()):
                    labels = _labels({**_target(node), "cpu": str(cpu), "mode": mode})
                    is_busy = mode in BUSY
                    for t, b, i_ in samples:
                        value = 1000.0 + share * (b if is_busy else i_)
                        out.append(f"node_cpu_seconds_total{labels} {_value(value)} {t:.3f}\n")
        return "".join(out)

    def _container_cpu(self, demands: dict[str, list[float]]) -> str:
        out = ["# TYPE container_cpu_usage_seconds counter\n"]
        times = self.times()
        for pod in self.pods:
            if pod.node is None or pod.start is None:
                continue
            node = self.node(pod.node)
            demand = demands[node.name]
            labels = _labels(
                {
                    "job": "kubelet",
                    "metrics_path": "/metrics/cadvisor",
                    "instance": f"{node.ip}:10250",
                    "node": node.name,
                    "namespace": pod.namespace,
                    "pod": pod.name,
                    "container": "app",
                    "image": "registry.example/app:1",
                    "cpu": "total",
                }
            )
            used = 0.0
            for i, t in enumerate(times):
                if i and pod.running(times[i - 1]):
                    served = min(1.0, node.cores / demand[i - 1]) if demand[i - 1] else 1.0
                    used += pod.use * served * self.scrape
                if pod.running(t):
                    out.append(
                        f"container_cpu_usage_seconds_total{labels} {_value(used)} {t:.3f}\n"
                    )
        return "".join(out)

    def _present(self, pod: Pod) -> list[float]:
        return [t for t in self.times() if pod.exists(t)]

    def _allocatable(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        times = self.times()
        for node in self.nodes:
            for resource, unit, value in (
                ("cpu", "core", node.cores),
                ("memory", "byte", float(node.memory)),
                ("pods", "integer", float(node.max_pods)),
            ):
                labels = {**KSM, "node": node.name, "resource": resource, "unit": unit}
                yield labels, [(t, value) for t in times]

    def _node_info(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for node in self.nodes:
            labels = {**KSM, "node": node.name, "internal_ip": node.ip}
            yield labels, [(t, 1.0) for t in self.times()]

    def _pod_labels(self, pod: Pod) -> dict[str, str]:
        return {**KSM, "namespace": pod.namespace, "pod": pod.name, "uid": pod.uid}

    def _pod_info(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for pod in self.pods:
            present = self._present(pod)
            created_by = {"ReplicaSet": pod.owner_name, "DaemonSet": pod.owner_name}.get(
                pod.owner_kind, ""
            )
            base = {
                **self._pod_labels(pod),
                "created_by_kind": pod.owner_kind if created_by else "",
                "created_by_name": created_by,
                "priority_class": "",
                "host_network": "false",
            }
            pending = [t for t in present if pod.bound is None or t < pod.bound]
            bound = [t for t in present if pod.bound is not None and t >= pod.bound]
            if pending:
                yield {**base, "node": "", "host_ip": "", "pod_ip": ""}, [(t, 1.0) for t in pending]
            if bound and pod.node is not None:
                ip = self.node(pod.node).ip
                labels = {**base, "node": pod.node, "host_ip": ip, "pod_ip": "10.244.0.9"}
                yield labels, [(t, 1.0) for t in bound]

    def _pod_times(self, name: str) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for pod in self.pods:
            since = {
                "kube_pod_created": pod.created,
                "kube_pod_start_time": pod.start,
                "kube_pod_status_scheduled_time": pod.bound,
                "kube_pod_completion_time": pod.end if pod.completed else None,
                "kube_pod_deletion_timestamp": None if pod.completed else pod.end,
            }[name]
            if since is None:
                continue
            points = [(t, since) for t in self._present(pod) if t >= since]
            if points:
                yield self._pod_labels(pod), points

    def _requests(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for pod in self.pods:
            for resource, unit, value in (
                ("cpu", "core", pod.cpu),
                ("memory", "byte", float(pod.memory)),
            ):
                if value <= 0:
                    continue
                labels = {
                    **self._pod_labels(pod),
                    "container": "app",
                    "node": pod.node or "",
                    "resource": resource,
                    "unit": unit,
                }
                yield labels, [(t, value) for t in self._present(pod)]

    def _owners(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for pod in self.pods:
            labels = {
                **self._pod_labels(pod),
                "owner_kind": pod.owner_kind,
                "owner_name": pod.owner_name,
                "owner_is_controller": "true" if pod.owner_kind else "",
            }
            yield labels, [(t, 1.0) for t in self._present(pod)]

    def _replicasets(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        seen: dict[tuple[str, str], str] = {}
        for pod in self.pods:
            if pod.owner_kind == "ReplicaSet":
                seen.setdefault((pod.namespace, pod.owner_name), pod.deployment)
        for (namespace, replicaset), deployment in sorted(seen.items()):
            labels = {
                **KSM,
                "namespace": namespace,
                "replicaset": replicaset,
                "owner_kind": "Deployment" if deployment else "",
                "owner_name": deployment,
                "owner_is_controller": "true" if deployment else "false",
            }
            yield labels, [(t, 1.0) for t in self.times()]

    def _schedulers(self) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
        for pod in self.pods:
            labels = {**self._pod_labels(pod), "name": pod.scheduler}
            yield labels, [(t, 1.0) for t in self._present(pod)]


POD_TIMES = (
    "kube_pod_created",
    "kube_pod_start_time",
    "kube_pod_status_scheduled_time",
    "kube_pod_completion_time",
    "kube_pod_deletion_timestamp",
)


def _target(node: Node) -> dict[str, str]:
    """The labels prometheus-operator gives the node-exporter target on `node`."""
    return {
        "job": "node-exporter",
        "instance": f"{node.ip}:9100",
        "namespace": "monitoring",
        "pod": f"node-exporter-{node.name}",
        "service": "kube-prometheus-stack-prometheus-node-exporter",
        "endpoint": "http-metrics",
        "container": "node-exporter",
    }


def node_exporter_pods(history: ClusterHistory) -> list[Pod]:
    """The node-exporter DaemonSet's pods, one per node, running since before the history:
    the stock CPU rules join node-exporter's series to node names through them."""
    return [
        Pod(
            "monitoring",
            f"node-exporter-{node.name}",
            created=history.start - 86400,
            cpu=0.1,
            use=0.0,
            node=node.name,
            bound=history.start - 86400,
            start=history.start - 86400,
            owner_kind="DaemonSet",
            owner_name="node-exporter",
        )
        for node in history.nodes
    ]


def _labels(labels: dict[str, str]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    return repr(float(v))
