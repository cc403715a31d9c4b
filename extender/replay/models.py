"""The scheduler models a replay runs: the simulation's profiles, plus `as-it-happened`
(driver.replay with no model). The driver writes their node caches (docs/replay.md, "Limits").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from extender.decisions.model import Snapshot
from extender.decisions.usage import EMPTY, UsageTable
from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.policy.settings import Settings
from extender.replay.model import ReplayNode
from extender.simulation import profiles
from extender.simulation.experiment import with_max_hosts
from extender.simulation.ours import OurExtender
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.workload import EPOCH, NodeSpec

REAL = "as-it-happened"
KUBE_SCHEDULER = profiles.KUBE_SCHEDULER
DECICE = profiles.DECICE
SCHEDULERS: tuple[str, ...] = profiles.SCHEDULERS


def node_spec(node: ReplayNode) -> NodeSpec:
    """The node as the simulation's agents read it, its CPU fractional (every reader copes)."""
    return NodeSpec(node.name, cast(int, node.cores), node.memory)


class DeferredExtender(OurExtender):
    """Our extender building the engine's tables (an install's cost) only when they are
    next read: a week has ten times more refreshes than decisions. The herd guard and the
    peaks follow every refresh at once; test_driver.py checks the placements are the same."""

    _due: tuple[Snapshot, float] | None = None

    def install(
        self,
        cpu: Mapping[str, float],
        cores: Mapping[str, float],
        now: float,
        usage: UsageTable = EMPTY,
    ) -> None:
        self._predict(cpu, now)
        self.engine.set_node_cores(dict(cores))
        snapshot = self.snapshot_of(cpu, now, usage)
        self.engine.guard.install(snapshot)
        self._due = (snapshot, now)

    def ready(self) -> None:
        if self._due is not None:
            (snapshot, now), self._due = self._due, None
            self.engine.install(snapshot, None, now)


@dataclass(frozen=True, slots=True)
class Options:
    seed: int = 1
    max_hosts: int | None = None
    weight: int = DEFAULT_WEIGHT
    cpu_metric: str = "cpu"
    refresh: int = 15


def build(name: str, settings: Settings, options: Options, defer: bool = True) -> KubeScheduler:
    """A fresh model for one run, as the simulation builds it; `defer`: DeferredExtender."""
    policy = with_max_hosts(settings, options.max_hosts)
    scheduler = profiles.build(
        name, options.seed, policy, options.weight, options.cpu_metric, options.refresh
    )
    if defer and scheduler.extender is not None:
        scheduler.extender = DeferredExtender(policy, EPOCH, options.cpu_metric, options.refresh)
    return scheduler
