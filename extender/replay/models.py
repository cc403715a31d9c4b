"""The scheduler models a replay runs: the simulation's profiles, plus `as-it-happened`
(driver.replay with no model). The driver writes their node caches (docs/replay.md, "Limits").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.policy.settings import Settings
from extender.replay.model import ReplayNode
from extender.simulation import profiles
from extender.simulation.experiment import with_max_hosts
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.workload import NodeSpec

REAL = "as-it-happened"
KUBE_SCHEDULER = profiles.KUBE_SCHEDULER
DECICE = profiles.DECICE
SCHEDULERS: tuple[str, ...] = profiles.SCHEDULERS


def node_spec(node: ReplayNode) -> NodeSpec:
    """The node as the simulation's agents read it, its CPU fractional (every reader copes)."""
    return NodeSpec(node.name, cast(int, node.cores), node.memory)


@dataclass(frozen=True, slots=True)
class Options:
    seed: int = 1
    max_hosts: int | None = None
    weight: int = DEFAULT_WEIGHT
    cpu_metric: str = "cpu"
    refresh: int = 15


def build(name: str, settings: Settings, options: Options, defer: bool = True) -> KubeScheduler:
    """A fresh model for one run, as the simulation builds it; `defer`: OurExtender.deferred."""
    policy = with_max_hosts(settings, options.max_hosts)
    scheduler = profiles.build(
        name, options.seed, policy, options.weight, options.cpu_metric, options.refresh
    )
    if scheduler.extender is not None:
        scheduler.extender.deferred = defer
    return scheduler
