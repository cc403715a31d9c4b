"""A small cluster with workloads, as a stock kube-prometheus-stack scrapes it, live.

`WorkloadExporter` serves, on 127.0.0.1, the raw series the stock recording rules
(tests/integration/kube-prometheus-stack-rules.yaml) and the shipped queries read, with
the labels the real exporters give them under kube-prometheus-stack:

* node-exporter: `node_cpu_seconds_total{job="node-exporter", instance="<ip>:9100", cpu,
  mode, namespace, pod, service, endpoint, container}` counters, one set per cpu of the
  node (no `node` label, as prometheus-operator's ServiceMonitor gives them);
* cAdvisor through the kubelet: `container_cpu_usage_seconds_total{job="kubelet",
  metrics_path="/metrics/cadvisor", instance="<ip>:10250", node, namespace, pod,
  container, image, name, id, ...}` counters per container, plus the pod's own cgroup
  (`container=""`, `image=""`), which the stock rule's `image!=""` leaves out;
* kube-state-metrics (`job="kube-state-metrics"`): `kube_pod_info` (with `node`),
  `kube_pod_owner`, `kube_pod_created` for every pod (the node-exporter pods, owned by
  their DaemonSet, included) and `kube_replicaset_owner` for every ReplicaSet, with
  kube-state-metrics' label names (internal/store/pod.go, replicaset.go: a ReplicaSet
  without an owner has `owner_kind=""`).

Every counter advances with wall-clock time at the rate in force: a node is busy
`(background x cores + the use of the pods running on it) / cores` of the time (the
background is load no scheduler sees), capped at its cores; a node asked for more serves
every pod on it in proportion, as a CPU-starved node does. There is no kubelet: the test
says which pod runs where (`run`), typically once the API shows it bound.

`history(start, end, step)` writes the same counters for the past as OpenMetrics text,
for `promtool tsdb create-blocks-from openmetrics` (promharness.backfill), so `[5m]`
rates are whole from the first scrape:

    with WorkloadExporter() as exporter:
        exporter.add_node("node-1", cores=8, background=0.1, now=start)
        exporter.add_replicaset("shop", "web-6d4b75cb6d", Owner("Deployment", "web"))
        exporter.run("shop", "web-6d4b75cb6d-bcdfg", "node-1", 1.0,
                      Owner("ReplicaSet", "web-6d4b75cb6d"), now=start)
        backfill(binary, exporter.history(start, time.time() - 2, 5), workdir)

`Deployment` makes the matching API objects (a Deployment, its ReplicaSet and pods that
name it in `ownerReferences` with the `pod-template-hash` label), as the Deployment and
ReplicaSet controllers would; none runs in tests/harness/controlplane.py.
"""

from __future__ import annotations

import datetime
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.harness.controlplane import JSON, Kube, pod_manifest
from tests.harness.promharness import MetricsEndpoint, StockExporter, format_value

MONITORING = "monitoring"
KSM = {"job": "kube-state-metrics", "instance": "10.1.0.5:8080"}
IMAGE = "registry.k8s.io/pause:3.10"
POD_IP = "10.244.0.2"
NODE_EXPORTER = "kube-prometheus-stack-prometheus-node-exporter"
#: The base of a node's counters: it has been up a while (its counters are not 0).
BOOTED = 1000.0


@dataclass(frozen=True, slots=True)
class Owner:
    """A controller named in `ownerReferences`: kind (ReplicaSet, Deployment, DaemonSet,
    StatefulSet, Job) and name."""

    kind: str
    name: str


class Counter:
    """A counter advancing at a rate that changes from time to time; its value at any
    time after its start is the integral of the rate (history and scrapes read one)."""

    def __init__(self, start: float, rate: float, base: float = 0.0) -> None:
        self.start = start
        self._changes: list[tuple[float, float, float]] = [(start, rate, base)]
        """(since, rate, value at since), in time order."""

    def set_rate(self, at: float, rate: float) -> None:
        since, old, value = self._changes[-1]
        if at < since:
            raise ValueError(f"a counter's rate changes in time order ({at} < {since})")
        self._changes.append((at, rate, value + old * (at - since)))

    def value(self, t: float) -> float | None:
        """None before the counter existed."""
        for since, rate, value in reversed(self._changes):
            if t >= since:
                return value + rate * (t - since)
        return None


@dataclass
class _Pod:
    namespace: str
    name: str
    uid: str
    node: str
    use: float
    """Cores it would use with the node to itself."""
    owner: Owner | None
    created: float
    container: str
    counter: Counter


@dataclass
class _Node:
    name: str
    cores: int
    background: float
    ip: str
    busy: Counter
    """Busy seconds of each cpu (every cpu equally busy)."""
    idle: Counter
    pods: dict[tuple[str, str], _Pod] = field(default_factory=dict)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _series(name: str, labels: Mapping[str, str]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}}"


def _sample(name: str, labels: Mapping[str, str], value: float) -> str:
    return f"{_series(name, labels)} {format_value(value)}"


def _uid(namespace: str, name: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class WorkloadExporter(MetricsEndpoint):
    """The raw series of nodes and the pods running on them (see the module docstring).

    Thread-safe: the test changes it while Prometheus scrapes."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._replicasets: dict[tuple[str, str], Owner | None] = {}
        super().__init__()

    # -- the cluster --------------------------------------------------------------------

    def add_node(
        self, name: str, *, cores: int, background: float, now: float | None = None
    ) -> None:
        """A node of `cores` cpus, `background` of them busy with load no scheduler sees,
        from `now` (default: the present) on; its node-exporter pod runs on it."""
        t = time.time() if now is None else now
        with self._lock:
            if name in self._nodes:
                raise ValueError(f"node {name} exists")
            ip = f"10.0.0.{len(self._nodes) + 10}"
            self._nodes[name] = _Node(name, cores, background, ip, Counter(t, 0.0), Counter(t, 0.0))
            self._rerate(self._nodes[name], t)

    def set_background(self, node: str, level: float, now: float | None = None) -> None:
        """From `now` (default: the present) on, `level` of `node`'s cores are busy with
        load no scheduler sees (load moving between nodes): its counters and its pods'
        advance at the new rates from then on and keep every value they had (monotonic)."""
        t = time.time() if now is None else now
        if level < 0:
            raise ValueError(f"a node's background is a share of its cores >= 0, not {level}")
        with self._lock:
            where = self._nodes.get(node)
            if where is None:
                raise KeyError(f"no node {node} (add_node first)")
            where.background = level
            self._rerate(where, t)

    def add_replicaset(self, namespace: str, name: str, owner: Owner | None) -> None:
        """A ReplicaSet and its controller (a Deployment's, or None for a bare one)."""
        with self._lock:
            self._replicasets[(namespace, name)] = owner

    def run(
        self,
        namespace: str,
        pod: str,
        node: str,
        cores_used: float,
        owner: Owner | None = None,
        *,
        uid: str | None = None,
        created: float | None = None,
        now: float | None = None,
    ) -> None:
        """Pod `namespace/pod` runs on `node` from `now` on, using `cores_used` cores (one
        container, `main`); `created`: its creationTimestamp (default `now`)."""
        t = time.time() if now is None else now
        with self._lock:
            where = self._nodes[node]
            key = (namespace, pod)
            if any(key in n.pods for n in self._nodes.values()):
                raise ValueError(f"pod {namespace}/{pod} runs already")
            where.pods[key] = _Pod(
                namespace,
                pod,
                uid or _uid(namespace, pod),
                node,
                cores_used,
                owner,
                t if created is None else created,
                "main",
                Counter(t, 0.0),
            )
            self._rerate(where, t)

    def stop(self, namespace: str, pod: str, now: float | None = None) -> None:
        """The pod is gone: its series go, its node is freed."""
        t = time.time() if now is None else now
        with self._lock:
            for node in self._nodes.values():
                if node.pods.pop((namespace, pod), None) is not None:
                    self._rerate(node, t)
                    return
        raise KeyError(f"pod {namespace}/{pod} does not run")

    def demand(self, node: str) -> float:
        """What `node` is asked for, as a share of its cores (may exceed 1): background
        plus the use of its pods. The utilisation the test judges a placement by."""
        with self._lock:
            n = self._nodes[node]
            return self._demand(n) / n.cores

    def pods_on(self, node: str) -> list[str]:
        with self._lock:
            return sorted(f"{ns}/{name}" for ns, name in self._nodes[node].pods)

    # -- rates ----------------------------------------------------------------------------

    @staticmethod
    def _demand(node: _Node) -> float:
        return node.background * node.cores + sum(p.use for p in node.pods.values())

    def _rerate(self, node: _Node, t: float) -> None:
        """New rates from `t` on, after the node's pods changed."""
        demand = self._demand(node)
        served = min(1.0, node.cores / demand) if demand > 0 else 1.0
        busy = min(demand, node.cores) / node.cores
        node.busy.set_rate(t, busy)
        node.idle.set_rate(t, 1.0 - busy)
        for pod in node.pods.values():
            pod.counter.set_rate(t, pod.use * served)

    # -- series ---------------------------------------------------------------------------

    def _node_exporter(self, node: _Node) -> dict[str, str]:
        """The labels prometheus-operator gives the node-exporter target on `node`."""
        return {
            "job": "node-exporter",
            "instance": f"{node.ip}:9100",
            "namespace": MONITORING,
            "pod": f"node-exporter-{node.name}",
            "service": NODE_EXPORTER,
            "endpoint": "http-metrics",
            "container": "node-exporter",
        }

    def _cpu_series(self, node: _Node, t: float) -> list[tuple[dict[str, str], float]]:
        busy, idle = node.busy.value(t), node.idle.value(t)
        if busy is None or idle is None:
            return []
        out = []
        for cpu in range(node.cores):
            for mode, share in (*StockExporter.BUSY.items(), *StockExporter.IDLE.items()):
                seconds = BOOTED + share * (busy if mode in StockExporter.BUSY else idle)
                out.append(({**self._node_exporter(node), "cpu": str(cpu), "mode": mode}, seconds))
        return out

    def _cadvisor(self, node: _Node, pod: _Pod) -> list[dict[str, str]]:
        """The container's labels, then the pod cgroup's (no container, no image)."""
        target = {
            "job": "kubelet",
            "metrics_path": "/metrics/cadvisor",
            "instance": f"{node.ip}:10250",
            "endpoint": "https-metrics",
            "service": "kube-prometheus-stack-kubelet",
            "node": node.name,
            "namespace": pod.namespace,
            "pod": pod.name,
        }
        cgroup = f"/kubepods/burstable/pod{pod.uid}"
        cid = hashlib.sha256(f"{pod.uid}/{pod.container}".encode()).hexdigest()
        container = {"container": pod.container, "image": IMAGE, "name": cid}
        return [
            {**target, **container, "id": f"{cgroup}/{cid}"},
            {**target, "container": "", "image": "", "name": "", "id": cgroup},
        ]

    def _node_series(self, t: float) -> list[tuple[dict[str, str], float]]:
        return [s for node in self._nodes.values() for s in self._cpu_series(node, t)]

    def _container_series(self, t: float) -> list[tuple[dict[str, str], float]]:
        out = []
        for node in self._nodes.values():
            for pod in node.pods.values():
                value = pod.counter.value(t)
                if value is not None:
                    out += [(labels, value) for labels in self._cadvisor(node, pod)]
        return out

    def _ksm(self) -> list[str]:
        """kube-state-metrics' lines: every pod (the node-exporter pods, owned by their
        DaemonSet, and the workloads'), then every ReplicaSet."""
        info, owners, created = (
            [f"# TYPE {name} gauge"]
            for name in ("kube_pod_info", "kube_pod_owner", "kube_pod_created")
        )
        for node in self._nodes.values():
            name = f"node-exporter-{node.name}"
            daemon: Owner | None = Owner("DaemonSet", NODE_EXPORTER)
            pods = [(MONITORING, name, _uid(MONITORING, name), daemon, node.busy.start, node.ip)]
            pods += [
                (p.namespace, p.name, p.uid, p.owner, p.created, POD_IP) for p in node.pods.values()
            ]
            for namespace, pod, uid, owner, at, ip in pods:
                ids = {"namespace": namespace, "pod": pod, "uid": uid}
                kind, owner_name = (owner.kind, owner.name) if owner else ("", "")
                placed = {
                    "host_ip": node.ip,
                    "pod_ip": ip,
                    "node": node.name,
                    "created_by_kind": kind,
                    "created_by_name": owner_name,
                    "priority_class": "",
                    "host_network": str(ip == node.ip).lower(),
                }
                info.append(_sample("kube_pod_info", {**KSM, **ids, **placed}, 1.0))
                owned = {
                    "owner_kind": kind,
                    "owner_name": owner_name,
                    "owner_is_controller": "true" if owner else "",
                }
                owners.append(_sample("kube_pod_owner", {**KSM, **ids, **owned}, 1.0))
                created.append(_sample("kube_pod_created", {**KSM, **ids}, float(int(at))))
        sets = ["# TYPE kube_replicaset_owner gauge"]
        for (namespace, name), rs_owner in sorted(self._replicasets.items()):
            kind, owner_name = (rs_owner.kind, rs_owner.name) if rs_owner else ("", "")
            labels = {
                **KSM,
                "namespace": namespace,
                "replicaset": name,
                "owner_kind": kind,
                "owner_name": owner_name,
                "owner_is_controller": "true" if rs_owner else "",
            }
            sets.append(_sample("kube_replicaset_owner", labels, 1.0))
        return info + owners + created + sets

    def _response(self) -> tuple[int, str]:
        t = time.time()
        lines = ["# TYPE node_cpu_seconds_total counter"]
        lines += [_sample("node_cpu_seconds_total", lb, v) for lb, v in self._node_series(t)]
        lines.append("# TYPE container_cpu_usage_seconds_total counter")
        lines += [
            _sample("container_cpu_usage_seconds_total", lb, v)
            for lb, v in self._container_series(t)
        ]
        lines += self._ksm()
        return 200, "\n".join(lines) + "\n"

    def history(self, start: float, end: float, step: float) -> str:
        """The counters from `start` to `end` every `step` s, as OpenMetrics text (one
        series' samples together; a counter only from when it existed)."""
        with self._lock:
            times = [start + i * step for i in range(int((end - start) // step) + 1)]
            node_rows = self._rows(times, self._node_series)
            pod_rows = self._rows(times, self._container_series)
        out = ["# TYPE node_cpu_seconds counter\n"]
        out += self._openmetrics("node_cpu_seconds_total", node_rows)
        out.append("# TYPE container_cpu_usage_seconds counter\n")
        out += self._openmetrics("container_cpu_usage_seconds_total", pod_rows)
        out.append("# EOF\n")
        return "".join(out)

    @staticmethod
    def _rows(
        times: Sequence[float], at: Callable[[float], list[tuple[dict[str, str], float]]]
    ) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
        """series (its labels) -> [(time, value)], from `at(t)` for each of `times`."""
        rows: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for t in times:
            for labels, value in at(t):
                rows.setdefault(tuple(labels.items()), []).append((t, value))
        return rows

    @staticmethod
    def _openmetrics(
        name: str, rows: Mapping[tuple[tuple[str, str], ...], list[tuple[float, float]]]
    ) -> list[str]:
        out = []
        for labels, samples in rows.items():
            head = _series(name, dict(labels))
            out += [f"{head} {format_value(v)} {t:.3f}\n" for t, v in samples]
        return out


# -- the API side ------------------------------------------------------------------------

#: The letters Kubernetes draws generated name suffixes from (apimachinery's rand.String).
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


def suffix(i: int, length: int = 5) -> str:
    """A pod name suffix in the style of the ReplicaSet controller's, from a number."""
    digest = int.from_bytes(hashlib.sha256(str(i).encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        digest, k = divmod(digest, len(_SUFFIX))
        out.append(_SUFFIX[k])
    return "".join(out)


def api_time(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Deployment:
    """A Deployment, its one ReplicaSet and its pods, made as their controllers would
    make them (no controller runs here): `create` makes the two objects, `pod` a pod's
    manifest naming the ReplicaSet as its controller."""

    namespace: str
    name: str
    template_hash: str
    cpu: str = "100m"
    memory: str = "64Mi"
    replicaset_uid: str = ""

    @property
    def replicaset(self) -> str:
        return f"{self.name}-{self.template_hash}"

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name, "pod-template-hash": self.template_hash}

    @property
    def owner(self) -> Owner:
        """The pods' owner as kube_pod_owner names it."""
        return Owner("ReplicaSet", self.replicaset)

    def _template(self) -> JSON:
        resources = {"requests": {"cpu": self.cpu, "memory": self.memory}}
        container = {"name": "main", "image": IMAGE, "resources": resources}
        return {"metadata": {"labels": self.labels}, "spec": {"containers": [container]}}

    def create(self, kube: Kube, replicas: int, *, in_api: bool = True) -> None:
        """The Deployment and its ReplicaSet (ownerReferences to the Deployment). Not
        `in_api`: the pods will name a ReplicaSet the API does not hold (nothing then
        selects them for kube-scheduler's default topology spreading)."""
        if not in_api:
            self.replicaset_uid = _uid(self.namespace, self.replicaset)
            return
        selector = {"matchLabels": {"app": self.name}}
        deployment = kube.post(
            f"/apis/apps/v1/namespaces/{self.namespace}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": self.name, "labels": {"app": self.name}},
                "spec": {"replicas": replicas, "selector": selector, "template": self._template()},
            },
        )
        controller = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": self.name,
            "uid": deployment["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        replicaset = kube.post(
            f"/apis/apps/v1/namespaces/{self.namespace}/replicasets",
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": self.replicaset,
                    "labels": self.labels,
                    "ownerReferences": [controller],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": self.labels},
                    "template": self._template(),
                },
            },
        )
        self.replicaset_uid = replicaset["metadata"]["uid"]

    def pod_name(self, i: int) -> str:
        return f"{self.replicaset}-{suffix(i)}"

    def pod(self, i: int, *, scheduler_name: str, node_name: str | None = None) -> JSON:
        """The manifest of pod number `i`."""
        if not self.replicaset_uid:
            raise RuntimeError("Deployment.create first: the pods name the ReplicaSet's uid")
        controller = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": self.replicaset,
            "uid": self.replicaset_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        manifest = pod_manifest(
            self.pod_name(i),
            scheduler_name=scheduler_name,
            cpu=self.cpu,
            memory=self.memory,
            labels=self.labels,
            owner_references=[controller],
            node_name=node_name,
        )
        manifest["spec"]["containers"][0].update(name="main")
        return manifest


def running_since(kube: Kube, namespace: str, names: Sequence[str], since: float) -> None:
    """Report pods Running since `since`, as a kubelet would have (status subresource):
    scheduled, started and ready then. The herd guard's pod watch then takes them for
    pods placed long ago (decisions/assignments.py reads the PodScheduled condition)."""
    at = api_time(since)
    status = {
        "phase": "Running",
        "podIP": POD_IP,
        "startTime": at,
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": at}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
    }
    kube.concurrently(
        lambda name: kube.merge_patch(
            f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": status}
        ),
        list(names),
    )
