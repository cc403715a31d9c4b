"""Our extender as kube-scheduler reaches it: the real engine, through the wire format.

The simulation must judge the code that serves, not a model of it. So every call goes the
way the service's verbs go: the request body kube-scheduler sends (`Pod` plus
`NodeNames`, nodeCacheCapable) is parsed by `decisions.wire.parse_extender_args`, decided
by `decisions.engine.Engine`, encoded by `encode_filter` / `encode_priorities`, and read
back the way the scheduler reads it (the filter's `NodeNames`; prioritize's hosts into a
map, a host missing from it scoring 0). What differs from production is only where
values come from: in place of the Prometheus provider and refresher, the simulation
installs snapshots it computed (prometheus.MetricPipeline), as the refresher would, with
the nodes' cores as the node informer would give them. Our bind reserves on the herd
guard, and the pod watch releases when a pod leaves, as in production.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.wire import (
    encode_filter,
    encode_priorities,
    parse_extender_args,
)
from extender.policy.settings import Settings
from extender.simulation.workload import PodSpec

NAMESPACE = "sim"


class OurExtender:
    """One extender process with one policy, driven by simulated time."""

    def __init__(self, settings: Settings, now: float, cpu_metric: str = "cpu") -> None:
        self.settings = settings
        self.metrics = tuple(m.name for m in settings.fetched_metrics)
        self.cpu_metric = cpu_metric
        self.engine = Engine(settings, Snapshot.empty(self.metrics), now)
        self.filters = settings.filters_anything
        """The scheduler config has a filterVerb only when the policy can reject a node."""
        self._scheduler_name = sorted(settings.scheduler_names)[0]
        self._source = "bind" if settings.bind.enabled else "watch"
        self._generation = 0
        self._pods: dict[str, bytes] = {}

    def install(self, cpu: Mapping[str, float], cores: Mapping[str, float], now: float) -> None:
        """A refresh: node CPU (0..1) for the CPU metric; any other metric of the policy
        answers no nodes, so its `onMissing` decides (the simulation measures CPU only)."""
        self._generation += 1
        series = {
            m: MetricSeries(values=dict(cpu) if m == self.cpu_metric else {}, fetched_at=now)
            for m in self.metrics
        }
        self.engine.set_node_cores(dict(cores))
        self.engine.install(Snapshot(series, now, self._generation), None, now)

    def _pod(self, pod: PodSpec) -> bytes:
        """The v1.Pod kube-scheduler sends, serialised once per pod."""
        doc = self._pods.get(pod.uid)
        if doc is None:
            requests = {"cpu": f"{pod.cpu_milli}m", "memory": str(pod.memory)}
            doc = orjson.dumps(
                {
                    "metadata": {"name": pod.uid, "namespace": NAMESPACE, "uid": pod.uid},
                    "spec": {
                        "schedulerName": self._scheduler_name,
                        "containers": [{"name": "main", "resources": {"requests": requests}}],
                    },
                }
            )
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
        self.engine.reserve(pod.uid, node, pod.cores, now, self._source)

    def released(self, pod: PodSpec, now: float) -> None:
        """The pod watch saw the pod go: what it reserved is free again."""
        self.engine.release(pod.uid, now)
        self._pods.pop(pod.uid, None)
