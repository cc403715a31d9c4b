"""The five schedulers compared, each a kube-scheduler profile (framework.py, scheduler.py).

- kube-scheduler: the default profile alone (upstream.py);
- decice: the same plus this extender through the real engine (ours.py);
- trimaran-targetloadpacking: Fit's and BalancedAllocation's scores off, TargetLoadPacking
  at weight 1 (peers/trimaran.py);
- trimaran-loadvariationriskbalancing: the defaults plus LoadVariationRiskBalancing at 1;
- koordinator-loadaware: the defaults plus LoadAwareScheduling's filter and score at 1
  (peers/koordinator.py).

Each gets its own tie-breaking RNG seeded `select-host:<seed>`: none borrows another's luck.
"""

from __future__ import annotations

import random

from extender.policy.settings import Settings
from extender.simulation.framework import PodTopologySpread
from extender.simulation.ours import OurExtender
from extender.simulation.peers.koordinator import LoadAware
from extender.simulation.peers.trimaran import LoadVariationRiskBalancing, TargetLoadPacking
from extender.simulation.scheduler import KubeScheduler, Weighted, default_scores
from extender.simulation.upstream import SPREAD_WEIGHT
from extender.simulation.workload import EPOCH

KUBE_SCHEDULER = "kube-scheduler"
DECICE = "decice"
TLP = "trimaran-targetloadpacking"
LVRB = "trimaran-loadvariationriskbalancing"
KOORDINATOR = "koordinator-loadaware"
PEERS = (TLP, LVRB, KOORDINATOR)
SCHEDULERS = (KUBE_SCHEDULER, DECICE, *PEERS)
SHORT = {
    KUBE_SCHEDULER: "kube-scheduler",
    DECICE: "decice",
    TLP: "trimaran-tlp",
    LVRB: "trimaran-lvrb",
    KOORDINATOR: "koordinator",
}
"""Column headings for the printed table."""


def build(
    name: str,
    seed: int,
    settings: Settings,
    weight: int = 1,
    cpu_metric: str = "cpu",
    refresh: int = 15,
) -> KubeScheduler:
    """A fresh scheduler of that name for one run (no state shared between runs)."""
    rng = random.Random(f"select-host:{seed}")
    spread = Weighted(PodTopologySpread(), SPREAD_WEIGHT)
    if name == KUBE_SCHEDULER:
        return KubeScheduler(rng, name=name)
    if name == DECICE:
        ours = OurExtender(settings, EPOCH, cpu_metric, refresh)
        return KubeScheduler(rng, ours, weight, name=name)
    if name == TLP:
        return KubeScheduler(rng, name=name, scores=[spread, Weighted(TargetLoadPacking(), 1)])
    if name == LVRB:
        plugin = LoadVariationRiskBalancing()
        return KubeScheduler(rng, name=name, scores=[*default_scores(), Weighted(plugin, 1)])
    if name == KOORDINATOR:
        aware = LoadAware()
        scores = [*default_scores(), Weighted(aware, 1)]
        return KubeScheduler(rng, name=name, scores=scores, filters=[aware])
    raise KeyError(name)
