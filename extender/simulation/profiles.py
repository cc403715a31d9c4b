"""The five schedulers compared, each a kube-scheduler profile: kube-scheduler's defaults;
decice (the same plus our extender); trimaran-targetloadpacking (Fit's and
BalancedAllocation's scores off); trimaran-loadvariationriskbalancing and
koordinator-loadaware (the defaults plus the plugin at 1). Each its own tie-break RNG.
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
SHORT = {  # the table's column headings
    KUBE_SCHEDULER: "kube-scheduler",
    DECICE: "decice",
    TLP: "trimaran-tlp",
    LVRB: "trimaran-lvrb",
    KOORDINATOR: "koordinator",
}


def build(
    name: str,
    seed: int,
    settings: Settings,
    weight: int = 1,
    cpu_metric: str = "cpu",
    refresh: int = 15,
) -> KubeScheduler:
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
