"""One kube-scheduler scheduling cycle, with or without our extender.

The order is upstream's (schedule_one.go): the NodeResourcesFit filter over every node;
the extenders' filter over the nodes that passed it; with one node left it is taken;
else each node's score is the default plugins' sum plus each extender's prioritize
score x weight x 10; selectHost takes the best, ties at random. Binding updates the
scheduler's cache of requests at once (the scheduler "assumes" the pod), so the next
pod's cycle sees it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from extender.simulation.ours import OurExtender
from extender.simulation.upstream import (
    NodeRequests,
    default_score,
    extender_points,
    fits,
    select_host,
)
from extender.simulation.workload import NodeSpec, PodSpec


class KubeScheduler:
    """kube-scheduler's default profile; `extender` adds ours to it (weight `weight`)."""

    def __init__(
        self, rng: random.Random, extender: OurExtender | None = None, weight: int = 1
    ) -> None:
        self.rng = rng
        self.extender = extender
        self.weight = weight
        self.nodes: dict[str, NodeRequests] = {}
        """The scheduler's node cache, in the order nodes joined."""

    @property
    def name(self) -> str:
        return "kube-scheduler" if self.extender is None else "kube-scheduler + decice"

    def add_node(self, node: NodeSpec) -> None:
        self.nodes[node.name] = NodeRequests(node.name, node.cores * 1000, node.memory)

    def refresh(self, cpu: Mapping[str, float], now: float) -> None:
        """Prometheus answered: only our extender listens."""
        if self.extender is not None:
            cores = {n.name: n.cpu / 1000 for n in self.nodes.values()}
            self.extender.install(cpu, cores, now)

    def schedule(self, pod: PodSpec, now: float) -> str | None:
        """The node the pod is bound to, or None (unschedulable: it waits and is retried)."""
        cpu, memory = pod.cpu_milli, pod.memory
        feasible = [n for n in self.nodes.values() if fits(n, cpu, memory)]
        if not feasible:
            return None
        extender = self.extender
        if extender is not None and extender.filters:
            passed = set(extender.filter(pod, [n.name for n in feasible], now))
            feasible = [n for n in feasible if n.name in passed]
            if not feasible:
                return None
        if len(feasible) == 1:
            chosen = feasible[0].name
        else:
            ours: Mapping[str, int] = {}
            if extender is not None:
                ours = extender.prioritize(pod, [n.name for n in feasible], now)
            weight = self.weight
            scored = [
                (
                    n.name,
                    default_score(n, cpu, memory) + extender_points(ours.get(n.name, 0), weight),
                )
                for n in feasible
            ]
            chosen = select_host(scored, self.rng)
        self.nodes[chosen].add(cpu, memory)
        if extender is not None:
            extender.bound(pod, chosen, now)
        return chosen

    def unbind(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod finished: its requests leave the node."""
        self.nodes[node].remove(pod.cpu_milli, pod.memory)
        if self.extender is not None:
            self.extender.released(pod, now)
