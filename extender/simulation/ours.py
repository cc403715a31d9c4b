"""Our extender as kube-scheduler reaches it: the real engine, through the wire format.

The simulation must judge the code that serves, not a model of it. So every call goes the
way the service's verbs go: the request body kube-scheduler sends (`Pod` plus
`NodeNames`, nodeCacheCapable) is parsed by `decisions.wire.parse_extender_args`, decided
by `decisions.engine.Engine`, encoded by `encode_filter` / `encode_priorities`, and read
back the way the scheduler reads it (the filter's `NodeNames`; prioritize's hosts into a
map, a host missing from it scoring 0). The pod is sent as its ReplicaSet made it
(`ownerReferences` to `<deployment>-<hash>`, the `pod-template-hash` label), so the engine
names its workload. What differs from production is only where values come from: in place
of the Prometheus provider and refresher, every `prometheus.interval` the simulation
installs what the refresher would fetch: node CPU (prometheus.MetricPipeline.metric, the
larger of the rule and the raw fast rate) and, on its own interval
(`herdGuard.usageInterval`), the pods' measured use (usagefeed), with the nodes' cores as
the node informer would give them. Our bind reserves on the herd
guard, and the pod watch releases when a pod leaves, as in production.
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
from extender.decisions.usage import EMPTY, TEMPLATE_HASH, UsageTable
from extender.decisions.wire import (
    encode_filter,
    encode_priorities,
    parse_extender_args,
)
from extender.policy.settings import Settings
from extender.simulation.usagefeed import NAMESPACE, usage_table
from extender.simulation.workload import EPOCH, PodSpec

if TYPE_CHECKING:
    from extender.simulation.framework import Feeds

DEFAULT_QUANTILE = 0.9
"""The workload quantile when the policy has no herdGuard.quantile."""


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
        self.filters = settings.filters_anything
        """The scheduler config has a filterVerb only when the policy can reject a node."""
        self.scheduler_name = sorted(settings.scheduler_names)[0]
        self._source = "bind" if settings.bind.enabled else "watch"
        self._generation = 0
        self._pods: dict[str, bytes] = {}
        self.refresh_interval = refresh_interval or max(1, round(settings.prometheus.interval))
        guard = settings.herd_guard
        self.quantile: float = getattr(guard, "quantile", DEFAULT_QUANTILE)
        self.usage_interval = max(1, round(getattr(guard, "usage_interval", self.refresh_interval)))
        self._peaks = NodePeaks(guard.peak_window, 1.0)
        self._predictions: Mapping[str, tuple[float, float]] = {}

    def install(
        self,
        cpu: Mapping[str, float],
        cores: Mapping[str, float],
        now: float,
        usage: UsageTable = EMPTY,
    ) -> None:
        """A refresh: node CPU (0..1) for the CPU metric and the pods' measured use; any
        other metric of the policy answers no nodes, so its `onMissing` decides (the
        simulation measures CPU only)."""
        self._predict(cpu, now)
        self.engine.set_node_cores(dict(cores))
        self.engine.install(self.snapshot_of(cpu, now, usage), None, now)

    def snapshot_of(self, cpu: Mapping[str, float], now: float, usage: UsageTable) -> Snapshot:
        """The snapshot a refresh of `cpu` at `now` installs."""
        self._generation += 1
        series = {
            m: MetricSeries(values=dict(cpu) if m == self.cpu_metric else {}, fetched_at=now)
            for m in self.metrics
        }
        return Snapshot(series, now, self._generation, usage=usage)

    def ready(self) -> None:
        """Before the engine's tables are read outside a verb (the rebalancer): nothing to
        do here (a replay's deferred installs are made)."""

    def _predict(self, cpu: Mapping[str, float], now: float) -> None:
        """The predicted peak's mean and spread per node (peaks.py, on the policy's window),
        followed here whether or not the policy filters by it, for PeakCalibration: the new
        values with the herd guard's load as it stands when they arrive (and as the guard's
        own do, the spreads of nodes with pods in flight wait)."""
        ledger = self.engine.guard.ledger
        load, margins = ledger.load, ledger.margins
        pods = {n: x - margins.get(n, 0.0) for n, x in load.items()}
        held = {n for n, x in pods.items() if abs(x) > 1e-9}
        predicted = {n: v + pods.get(n, 0.0) for n, v in cpu.items()}
        self._peaks.observe(predicted, now, held)
        self._predictions = {
            n: (x, s) for n, x in predicted.items() if (s := self._peaks.spread(n)) is not None
        }

    def take_predictions(self) -> Mapping[str, tuple[float, float]]:
        """node -> (predicted value, its spread), new since asked last."""
        out, self._predictions = self._predictions, {}
        return out

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        """Our refresher's two loops: node CPU every `prometheus.interval`, the pods'
        measured use every `herdGuard.usageInterval` (each answer as Prometheus gives it
        then; the rule's latest evaluation for the pods' series)."""
        if t % self.refresh_interval == 0:
            self.install(
                feeds.prometheus.metric(t), self._cores(feeds), now, self.engine.snapshot.usage
            )
        evaluated = feeds.prometheus.evaluated_at
        if t % self.usage_interval == 0 and evaluated is not None:
            self.engine.install_usage(usage_table(feeds.meter, evaluated, self.quantile, now), now)

    @staticmethod
    def _cores(feeds: Feeds) -> dict[str, float]:
        return {name: float(n.cores) for name, n in feeds.nodes.items()}

    def _pod(self, pod: PodSpec) -> bytes:
        """The v1.Pod kube-scheduler sends, serialised once per pod."""
        doc = self._pods.get(pod.uid)
        if doc is None:
            doc = orjson.dumps(pod_document(pod, self.scheduler_name))
            self._pods[pod.uid] = doc
        return doc

    def _body(self, pod: PodSpec, names: Sequence[str]) -> bytes:
        return b'{"Pod":' + self._pod(pod) + b',"NodeNames":' + orjson.dumps(list(names)) + b"}"

    def filter(self, pod: PodSpec, names: Sequence[str], now: float) -> list[str]:
        """The nodes our filter passes, as the scheduler reads our answer."""
        args = parse_extender_args(self._body(pod, names), self.engine.answered_nodes(now))
        answer = orjson.loads(encode_filter(args, self.engine.filter(args, now)))
        passed: list[str] = answer["NodeNames"] or []
        return passed

    def prioritize(self, pod: PodSpec, names: Sequence[str], now: float) -> dict[str, int]:
        """host -> our 0..10 score; a host missing from the answer (maxHosts) scores 0."""
        args = parse_extender_args(self._body(pod, names), self.engine.answered_nodes(now))
        answer = orjson.loads(encode_priorities(self.engine.prioritize(args, now)))
        return {h["Host"]: h["Score"] for h in answer}

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        """Our bind went through: remember where, and count the pod on the herd guard."""
        self.engine.pods.placed(pod.uid, node)
        load = self.engine.guard.ledger.load
        before = load.get(node, 0.0)
        self.engine.reserve(pod.uid, node, pod.cores, now, self._source)
        self._peaks.shift(node, load.get(node, 0.0) - before)  # as the guard's own spreads

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod watch saw the pod go: what it reserved is free again, and its node is
        credited what the metric still shows of it."""
        meta = orjson.loads(self._pod(pod))["metadata"]
        facts = PodFacts(
            pod.uid,
            meta["name"],
            meta["namespace"],
            self.scheduler_name,
            pod.cores,
            node,
            owners=meta.get("ownerReferences"),
            labels=meta.get("labels"),
        )
        self.engine.release(pod.uid, now, facts)
        self._pods.pop(pod.uid, None)


def _timestamp(arrival: float) -> str:
    """The pod's creationTimestamp: its arrival on the engine's clock (EPOCH + t)."""
    stamp = datetime.datetime.fromtimestamp(EPOCH + arrival, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_document(pod: PodSpec, scheduler_name: str) -> dict[str, Any]:
    """The pod as its ReplicaSet created it (a bare pod without a workload)."""
    resources: dict[str, Any] = {
        "requests": {"cpu": f"{pod.cpu_milli}m", "memory": str(pod.memory)}
    }
    if pod.cpu_limit_milli is not None:
        resources["limits"] = {"cpu": f"{pod.cpu_limit_milli}m"}
    metadata: dict[str, Any] = {
        "name": pod.uid,
        "namespace": NAMESPACE,
        "uid": pod.uid,
        "creationTimestamp": _timestamp(pod.arrival),
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
