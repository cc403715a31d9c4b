"""The five schedulers compared, each a kube-scheduler profile (framework.py, scheduler.py).

- kube-scheduler: the default profile alone (NodeResourcesFit, BalancedAllocation,
  PodTopologySpread; upstream.py);
- decice: the same plus this extender through the real engine (ours.py), at the weight
  the plan gives it;
- trimaran-targetloadpacking: Fit's and BalancedAllocation's scores off, TargetLoadPacking
  at weight 1 (peers/trimaran.py);
- trimaran-loadvariationriskbalancing: the defaults plus LoadVariationRiskBalancing at
  weight 1;
- koordinator-loadaware: the defaults plus LoadAwareScheduling's filter and score at
  weight 1 (peers/koordinator.py).

Each gets its own tie-breaking RNG seeded `select-host:<seed>`: none borrows another's luck.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from extender.policy.settings import Settings
from extender.simulation.framework import PodTopologySpread, RequestScores
from extender.simulation.ours import OurExtender
from extender.simulation.peers.koordinator import LoadAware
from extender.simulation.peers.trimaran import LoadVariationRiskBalancing, TargetLoadPacking
from extender.simulation.scheduler import KubeScheduler, Weighted
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


def _spread() -> Weighted:
    return Weighted(PodTopologySpread(), SPREAD_WEIGHT)


def _kube(
    seed: int, settings: Settings, weight: int, cpu_metric: str, refresh: int
) -> KubeScheduler:
    return KubeScheduler(random.Random(f"select-host:{seed}"), name=KUBE_SCHEDULER)


def _decice(
    seed: int, settings: Settings, weight: int, cpu_metric: str, refresh: int
) -> KubeScheduler:
    ours = OurExtender(settings, EPOCH, cpu_metric, refresh)
    return KubeScheduler(random.Random(f"select-host:{seed}"), ours, weight, name=DECICE)


def _tlp(
    seed: int, settings: Settings, weight: int, cpu_metric: str, refresh: int
) -> KubeScheduler:
    scores = [_spread(), Weighted(TargetLoadPacking(), 1)]
    return KubeScheduler(random.Random(f"select-host:{seed}"), name=TLP, scores=scores)


def _lvrb(
    seed: int, settings: Settings, weight: int, cpu_metric: str, refresh: int
) -> KubeScheduler:
    scores = [Weighted(RequestScores(), 1), _spread(), Weighted(LoadVariationRiskBalancing(), 1)]
    return KubeScheduler(random.Random(f"select-host:{seed}"), name=LVRB, scores=scores)


def _koordinator(
    seed: int, settings: Settings, weight: int, cpu_metric: str, refresh: int
) -> KubeScheduler:
    load_aware = LoadAware()
    scores = [Weighted(RequestScores(), 1), _spread(), Weighted(load_aware, 1)]
    return KubeScheduler(
        random.Random(f"select-host:{seed}"),
        name=KOORDINATOR,
        scores=scores,
        filters=[load_aware],
    )


Builder = Callable[[int, Settings, int, str, int], KubeScheduler]
BUILDERS: Mapping[str, Builder] = {
    KUBE_SCHEDULER: _kube,
    DECICE: _decice,
    TLP: _tlp,
    LVRB: _lvrb,
    KOORDINATOR: _koordinator,
}


def build(
    name: str,
    seed: int,
    settings: Settings,
    weight: int = 1,
    cpu_metric: str = "cpu",
    refresh: int = 15,
) -> KubeScheduler:
    """A fresh scheduler of that name for one run (no state shared between runs)."""
    return BUILDERS[name](seed, settings, weight, cpu_metric, refresh)
