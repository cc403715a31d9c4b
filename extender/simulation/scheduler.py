"""One kube-scheduler scheduling cycle, for any profile of plugins and our extender.

The order is upstream's (schedule_one.go): the NodeResourcesFit filter over every node,
then the profile's other filter plugins; the extenders' filter over the nodes that passed;
with one node left it is taken; else each node's score is the sum of each score plugin's
score x its weight plus each extender's prioritize score x its weight x 10; selectHost
takes the best, ties at random. Binding updates the scheduler's cache of requests at once
(the scheduler "assumes" the pod), so the next pod's cycle sees it, and every plugin hears
of the pod (Reserve, or its informer).
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
    """kube-scheduler's default score plugins that differ between simulated nodes."""
    return [Weighted(RequestScores(), 1), Weighted(PodTopologySpread(), SPREAD_WEIGHT)]


class KubeScheduler:
    """A kube-scheduler profile: filter plugins, weighted score plugins, an extender."""

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
        """The extender's weight in the scheduler config."""
        self.scores = list(default_scores() if scores is None else scores)
        self.filters = list(filters)
        self.name = name or ("kube-scheduler" if extender is None else "decice")
        self.nodes: dict[str, NodeRequests] = {}
        """The scheduler's node cache, in the order nodes joined."""
        plugins: dict[int, Plugin] = {id(p): p for p in self.filters}
        plugins.update((id(w.plugin), w.plugin) for w in self.scores)
        self._plugins = list(plugins.values())

    def add_node(self, node: NodeSpec) -> None:
        self.nodes[node.name] = NodeRequests(node.name, node.cores * 1000, node.memory)

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        """A tick boundary: each plugin and the extender read what they read."""
        for plugin in self._plugins:
            plugin.observe(t, now, feeds)
        if self.extender is not None:
            self.extender.observe(t, now, feeds)

    def predicted_peaks(self) -> Mapping[str, tuple[float, float]]:
        """node -> (mean, spread) of the peak predictor it scores or filters by, when one
        predicted anew this tick (ours, LoadVariationRiskBalancing), else empty."""
        if self.extender is not None:
            return self.extender.take_predictions()
        for plugin in self._plugins:
            found = plugin.take_predictions()
            if found:
                return found
        return {}

    def schedule(self, pod: PodSpec, now: float) -> str | None:
        """The node the pod is bound to, or None (unschedulable: it waits and is retried)."""
        cpu, memory = pod.cpu_milli, pod.memory
        feasible = fitting_nodes(self.nodes.values(), cpu, memory)
        for plugin in self.filters:
            if not feasible:
                return None
            feasible = plugin.filter(pod, feasible, now)
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
            chosen = select_host(self._totals(pod, feasible, now), self.rng)
        self.nodes[chosen].add(cpu, memory, pod.replicaset)
        for plugin in self._plugins:
            plugin.bound(pod, chosen, now)
        if extender is not None:
            extender.bound(pod, chosen, now)
        return chosen

    def _totals(
        self, pod: PodSpec, feasible: list[NodeRequests], now: float
    ) -> list[tuple[str, int]]:
        totals: list[int] | None = None
        for w in self.scores:
            scores = w.plugin.score(pod, feasible, now)
            if scores is None:
                continue
            weight = w.weight
            if totals is None:
                totals = [s * weight for s in scores] if weight != 1 else scores
            else:
                totals = [t + s * weight for t, s in zip(totals, scores, strict=True)]
        if totals is None:
            totals = [0] * len(feasible)
        names = [n.name for n in feasible]
        if self.extender is not None:
            ours: Mapping[str, int] = self.extender.prioritize(pod, names, now)
            points = extender_points(1, self.weight)  # per point of our 0..10 score
            totals = [t + ours.get(h, 0) * points for t, h in zip(totals, names, strict=True)]
        return list(zip(names, totals, strict=True))

    def unbind(self, pod: PodSpec, node: str, now: float) -> None:
        """The pod finished: its requests leave the node."""
        self.nodes[node].remove(pod.cpu_milli, pod.memory, pod.replicaset)
        for plugin in self._plugins:
            plugin.released(pod, node, now)
        if self.extender is not None:
            self.extender.released(pod, node, now)
