"""One kube-scheduler scheduling cycle, for any profile of plugins and our extender, in
upstream's order (pkg/scheduler/schedule_one.go): filters, the extender's filter, scores
plus the extender's x weight x 10, selectHost; the bound pod is assumed at once.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.simulation.framework import (
    Feeds,
    Plugin,
    PodTopologySpread,
    RequestScores,
)
from extender.simulation.ours import OurExtender
from extender.simulation.upstream import (
    SPREAD_WEIGHT,
    NodeRequests,
    extender_points,
    fitting_nodes,
    select_host,
)
from extender.simulation.workload import NodeSpec, PodSpec


@dataclass(frozen=True, slots=True)
class Weighted:
    plugin: Plugin
    weight: int


def default_scores() -> list[Weighted]:
    return [Weighted(RequestScores(), 1), Weighted(PodTopologySpread(), SPREAD_WEIGHT)]


class KubeScheduler:
    def __init__(
        self,
        rng: random.Random,
        extender: OurExtender | None = None,
        weight: int = 1,
        *,
        name: str | None = None,
        scores: Sequence[Weighted] | None = None,
        filters: Sequence[Plugin] = (),
    ) -> None:
        self.rng = rng
        self.extender = extender
        self.weight = weight
        self.scores = list(default_scores() if scores is None else scores)
        self.filters = list(filters)
        self.name = name or ("kube-scheduler" if extender is None else "decice")
        self.nodes: dict[str, NodeRequests] = {}
        plugins: dict[int, Plugin | OurExtender] = {id(p): p for p in self.filters}
        plugins.update((id(w.plugin), w.plugin) for w in self.scores)
        self._plugins = [*plugins.values(), *([extender] if extender is not None else [])]
        """Each once, our extender last: what hears of ticks, binds and pods gone."""

    def add_node(self, node: NodeSpec) -> None:
        self.nodes[node.name] = NodeRequests(node.name, node.cores * 1000, node.memory)

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        for plugin in self._plugins:
            plugin.observe(t, now, feeds)

    def predicted_peaks(self) -> Mapping[str, tuple[float, float]]:
        """node -> (mean, spread) of the peaks it predicts, when new this tick."""
        for plugin in self._plugins:
            found = plugin.take_predictions()
            if found:
                return found
        return {}

    def schedule(self, pod: PodSpec, now: float) -> str | None:
        """The node the pod is bound to, or None (it waits and is retried)."""
        cpu, memory = pod.cpu_milli, pod.memory
        feasible = fitting_nodes(self.nodes.values(), cpu, memory)
        for plugin in self.filters:
            if not feasible:
                return None
            feasible = plugin.filter(pod, feasible, now)
        if not feasible:
            return None
        extender = self.extender
        if extender is not None:
            extender.ready()
            if extender.filters:
                passed = set(extender.filter(pod, [n.name for n in feasible], now))
                feasible = [n for n in feasible if n.name in passed]
                if not feasible:
                    return None
        if len(feasible) == 1:
            chosen = feasible[0].name
        else:
            chosen = select_host(self._totals(pod, feasible, now), self.rng)
        self.nodes[chosen].add(cpu, memory, pod.replicaset)
        for listener in self._plugins:
            listener.bound(pod, chosen, now)
        return chosen

    def _totals(
        self, pod: PodSpec, feasible: list[NodeRequests], now: float
    ) -> list[tuple[str, int]]:
        totals = [0] * len(feasible)
        for w in self.scores:
            scores = w.plugin.score(pod, feasible, now)
            if scores is not None:
                totals = [t + s * w.weight for t, s in zip(totals, scores, strict=True)]
        names = [n.name for n in feasible]
        if self.extender is not None:
            ours: Mapping[str, int] = self.extender.prioritize(pod, names, now)
            points = extender_points(1, self.weight)  # per point of our 0..10 score
            totals = [t + ours.get(h, 0) * points for t, h in zip(totals, names, strict=True)]
        return list(zip(names, totals, strict=True))

    def unbind(self, pod: PodSpec, node: str, now: float) -> None:
        self.nodes[node].add(pod.cpu_milli, pod.memory, pod.replicaset, -1)
        for plugin in self._plugins:
            plugin.released(pod, node, now)
