"""Our extender as kube-scheduler reaches it: the body it sends is parsed by decisions.wire,
decided by the real Engine, encoded and read back. Only the values' source differs: the
simulation installs what the refresher would fetch: node CPU (MetricPipeline.metric) and
the measured use beside it (the shipped `herdGuard.usageQuery` and `podUsageQuery`): per
Deployment the quantile and median of its pods' `...:sum_rate5m`; per pod younger than
YOUNG_POD its own `...:sum_irate` (`usage_table`).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.peaks import NodePeaks
from extender.decisions.pods import PodFacts
from extender.decisions.usage import EMPTY, TEMPLATE_HASH, UsageTable, WorkloadKey, WorkloadUse
from extender.decisions.wire import (
    encode_filter,
    encode_priorities,
    parse_extender_args,
)
from extender.policy.settings import Settings
from extender.simulation.ledger import PodMeter
from extender.simulation.stats import percentile
from extender.simulation.workload import EPOCH, PodSpec

if TYPE_CHECKING:
    from extender.simulation.framework import Feeds

NAMESPACE = "sim"
YOUNG_POD = 900.0  # the shipped podUsageQuery's age limit


class OurExtender:
    """One extender process with one policy, driven by simulated time."""

    def __init__(
        self,
        settings: Settings,
        now: float,
        cpu_metric: str = "cpu",
        refresh_interval: int | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = tuple(m.name for m in settings.fetched_metrics)
        self.cpu_metric = cpu_metric
        self.engine = Engine(settings, Snapshot.empty(self.metrics), now)
        self.filters = settings.filters_anything  # a filterVerb only if it can reject
        self.scheduler_name = sorted(settings.scheduler_names)[0]
        self._source = "bind" if settings.bind.enabled else "watch"
        self._generation = 0
        self._pods: dict[str, bytes] = {}
        self.refresh_interval = refresh_interval or max(1, round(settings.prometheus.interval))
        guard = settings.herd_guard
        self.quantile = guard.quantile
        self.usage_interval = max(1, round(guard.usage_interval))
        self._peaks = NodePeaks(guard.peak_window, 1.0)
        self._predictions: Mapping[str, tuple[float, float]] = {}
        self.deferred = False
        """A replay's: a week has ten times more refreshes than decisions, so the engine's
        tables (an install's cost) are built when next read; the herd guard and the peaks
        follow every refresh at once (test_driver.py checks the placements are the same)."""
        self._due: tuple[Snapshot, float] | None = None

    def install(
        self,
        cpu: Mapping[str, float],
        cores: Mapping[str, float],
        now: float,
        usage: UsageTable = EMPTY,
    ) -> None:
        """A refresh: node CPU and the pods' use; other metrics' `onMissing` decides."""
        self._predict(cpu, now)
        self.engine.set_node_cores(dict(cores))
        self._generation += 1
        series = {
            m: MetricSeries(values=dict(cpu) if m == self.cpu_metric else {}, fetched_at=now)
            for m in self.metrics
        }
        snapshot = Snapshot(series, now, self._generation, usage=usage)
        if self.deferred:
            self.engine.guard.install(snapshot)
            self._due = (snapshot, now)
        else:
            self.engine.install(snapshot, None, now)

    def ready(self) -> None:
        """Before the tables are read (a decision, the rebalancer): a deferred install's."""
        if self._due is not None:
            (snapshot, now), self._due = self._due, None
            self.engine.install(snapshot, None, now)

    def _predict(self, cpu: Mapping[str, float], now: float) -> None:
        """Each node's predicted peak and spread (peaks.py), for PeakCalibration; as the
        guard's own, nodes with pods in flight keep theirs."""
        pods = self.engine.guard.ledger.in_flight()
        predicted = {n: v + pods.get(n, 0.0) for n, v in cpu.items()}
        self._peaks.observe(predicted, now, pods.keys())
        self._predictions = {
            n: (x, s) for n, x in predicted.items() if (s := self._peaks.spread(n)) is not None
        }

    def take_predictions(self) -> Mapping[str, tuple[float, float]]:
        out, self._predictions = self._predictions, {}
        return out

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        """The refresher's two loops: node CPU, then the pods' use, each on its interval."""
        if t % self.refresh_interval == 0:
            cores = {name: float(n.cores) for name, n in feeds.nodes.items()}
            self.install(feeds.prometheus.metric(t), cores, now, self.engine.snapshot.usage)
        evaluated = feeds.prometheus.evaluated_at
        if t % self.usage_interval == 0 and evaluated is not None:
            self.engine.install_usage(usage_table(feeds.meter, evaluated, self.quantile, now), now)

    def _pod(self, pod: PodSpec) -> bytes:
        doc = self._pods.get(pod.uid)
        if doc is None:
            doc = orjson.dumps(pod_document(pod, self.scheduler_name))
            self._pods[pod.uid] = doc
        return doc

    def _body(self, pod: PodSpec, names: Sequence[str]) -> bytes:
        return b'{"Pod":' + self._pod(pod) + b',"NodeNames":' + orjson.dumps(list(names)) + b"}"

    def filter(self, pod: PodSpec, names: Sequence[str], now: float) -> list[str]:
        args = parse_extender_args(self._body(pod, names), self.engine.answered_nodes(now))
        answer = orjson.loads(encode_filter(args, self.engine.filter(args, now)))
        return list(answer["NodeNames"] or [])

    def prioritize(self, pod: PodSpec, names: Sequence[str], now: float) -> dict[str, int]:
        """host -> our 0..10 score; a host missing from the answer (maxHosts) scores 0."""
        args = parse_extender_args(self._body(pod, names), self.engine.answered_nodes(now))
        answer = orjson.loads(encode_priorities(self.engine.prioritize(args, now)))
        return {h["Host"]: h["Score"] for h in answer}

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        self.engine.pods.placed(pod.uid, node)
        load = self.engine.guard.ledger.load
        before = load.get(node, 0.0)
        self.engine.reserve(pod.uid, node, pod.cores, now, self._source)
        self._peaks.shift(node, load.get(node, 0.0) - before)  # as the guard's own spreads

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod watch saw it go: its reservation is freed."""
        self.engine.release(pod.uid, now, pod_facts(pod, node, self.scheduler_name))
        self._pods.pop(pod.uid, None)


def pod_facts(pod: PodSpec, node: str, scheduler_name: str) -> PodFacts:
    """The pod as the pod watch tells it."""
    meta = pod_document(pod, scheduler_name)["metadata"]
    owners, labels = meta.get("ownerReferences"), meta.get("labels")
    return PodFacts(
        pod.uid, pod.uid, NAMESPACE, scheduler_name, pod.cores, node, None, owners, labels
    )


def pod_document(pod: PodSpec, scheduler_name: str) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "requests": {"cpu": f"{pod.cpu_milli}m", "memory": str(pod.memory)}
    }
    if pod.cpu_limit_milli is not None:
        resources["limits"] = {"cpu": f"{pod.cpu_limit_milli}m"}
    metadata: dict[str, Any] = {
        "name": pod.uid,
        "namespace": NAMESPACE,
        "uid": pod.uid,
        "creationTimestamp": datetime.datetime.fromtimestamp(
            EPOCH + pod.arrival, tz=datetime.UTC
        ).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if pod.workload:
        metadata["labels"] = {TEMPLATE_HASH: pod.template_hash}
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": pod.replicaset,
                "uid": f"rs-{pod.replicaset}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [{"name": "main", "resources": resources}],
        },
    }


def usage_table(meter: PodMeter, evaluated_at: float, quantile: float, now: float) -> UsageTable:
    by_workload: dict[str, list[float]] = {}
    pods: dict[tuple[str, str], float] = {}
    for uid, entry in meter.running.items():
        if entry.pod.workload:
            rate = meter.rate(entry, evaluated_at)
            if rate is not None:
                by_workload.setdefault(entry.pod.workload, []).append(rate)
        if evaluated_at - entry.pod.arrival < YOUNG_POD:
            own = meter.irate(entry, evaluated_at)
            if own is not None:
                pods[(NAMESPACE, uid)] = own
    workloads = {
        WorkloadKey(NAMESPACE, "deployment", name): WorkloadUse(
            percentile(values, 100 * quantile), len(values), percentile(values, 50)
        )
        for name, values in sorted(by_workload.items())
    }
    return UsageTable(workloads=workloads, pods=pods, fetched_at=now)
