"""Our rebalancer in the simulation: the real plan (rebalancing.plan) over the real tables,
every `rebalance.interval`; the run then stops each pod it evicts and its successor arrives
at once (Eviction API, ReplicaSet controller; no PodDisruptionBudgets). Off unless `evict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.decisions.pods import PodFacts
from extender.rebalancing.plan import plan
from extender.rebalancing.pods import RunningPod
from extender.simulation.ours import OurExtender, pod_document
from extender.simulation.workload import PodSpec


@dataclass(frozen=True, slots=True)
class Placed:
    pod: PodSpec
    node: str
    since: float  # on the engine's clock


class Rebalancer:
    def __init__(self, ours: OurExtender) -> None:
        self.ours = ours
        self.interval = max(1, round(ours.settings.rebalance.interval))
        self._streaks: dict[str, int] = {}

    @staticmethod
    def active(ours: OurExtender) -> bool:
        return ours.settings.rebalance.mode == "evict"

    def check(self, running: Mapping[str, Placed], now: float) -> list[str]:
        self.ours.ready()
        engine = self.ours.engine
        settings = engine.settings
        pods = [_running(p, self.ours.scheduler_name) for p in running.values()]
        tables = {name: engine.table(now, p) for name, p in settings.policy_map.items()}
        cores = engine.guard.ledger.node_cores
        result = plan(settings, pods, tables, engine.snapshot, self._streaks, cores, now)
        self._streaks = result.streaks
        return [d.pod.facts.uid for d in result.moves]


def successor(pod: PodSpec, left: float, now: float, generation: int) -> PodSpec:
    """The pod its ReplicaSet creates once `pod` is evicted with `left` seconds to run."""
    return PodSpec(
        uid=f"{pod.uid.split('~')[0]}~{generation}",
        cpu_milli=pod.cpu_milli,
        memory=pod.memory,
        usage=pod.usage,
        arrival=now,
        duration=max(1.0, left),
        workload=pod.workload,
        template_hash=pod.template_hash,
        cpu_limit_milli=pod.cpu_limit_milli,
    )


def _running(p: Placed, scheduler_name: str) -> RunningPod:
    doc = pod_document(p.pod, scheduler_name)
    meta = doc["metadata"]
    facts = PodFacts(
        uid=p.pod.uid,
        name=meta["name"],
        namespace=meta["namespace"],
        scheduler_name=scheduler_name,
        cpu_request=p.pod.cores,
        node_name=p.node,
        owners=meta.get("ownerReferences"),
        labels=meta.get("labels"),
    )
    owner = "ReplicaSet" if p.pod.workload else None
    return RunningPod(facts=facts, owner_kind=owner, created=p.since)
