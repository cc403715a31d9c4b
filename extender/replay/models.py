"""The scheduler models a replay runs: the simulation's, built and fed as it builds them.

Each row of the report is one model of extender.simulation.profiles (kube-scheduler's
default profile, ours through the real engine, the peers), plus `as-it-happened` (the
real placements, driver.replay with no model). Each is a KubeScheduler profile driven
through its public surface: `observe` at every tick with the cluster's Feeds, `schedule`,
`unbind`, and its node cache `nodes`.

This is the replay's small adapter to the simulation, to delete once the simulation takes
a run of given nodes, arrivals and per-pod use (see docs/replay.md, "Limits"): the
simulation adds nodes from a NodeSpec of whole cores and never removes one, and its
scheduler counts only the pods it placed itself. A replayed cluster has fractional
allocatable CPU, nodes that leave, and pods of other schedulers whose requests
kube-scheduler counts, so `SchedulerModel` writes the scheduler's node cache (NodeRequests)
itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from extender.decisions.model import Snapshot
from extender.decisions.usage import EMPTY, UsageTable
from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.policy.settings import Settings
from extender.replay.model import ReplayNode
from extender.simulation import profiles
from extender.simulation.experiment import with_max_hosts
from extender.simulation.framework import Feeds
from extender.simulation.ours import OurExtender
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.upstream import NodeRequests
from extender.simulation.workload import EPOCH, NodeSpec, PodSpec

REAL = "as-it-happened"
KUBE_SCHEDULER = profiles.KUBE_SCHEDULER
DECICE = profiles.DECICE
SCHEDULERS: tuple[str, ...] = profiles.SCHEDULERS
"""The models, in report order (the real placements come before them)."""


def node_spec(node: ReplayNode) -> NodeSpec:
    """The node as the simulation's agents read it. Its allocatable CPU stays fractional
    (7.91 cores is not 8): NodeSpec says int, every reader takes a number."""
    return NodeSpec(node.name, cast(int, node.cores), node.memory)


class DeferredExtender(OurExtender):
    """Our extender whose refresher's answer builds the engine's tables only when the next
    pod is decided (or the rebalancer reads them).

    A week has 40,000 refreshes and a tenth as many decisions; building the engine's tables
    is the costly part of an install. So each refresh installs at once what follows every
    refresh, the herd guard's reservations fading and the nodes' spreads (peaks.py), and
    only the table building waits for the next read, from the very snapshot the refresh
    gave (tests/replay/test_driver.py checks the placements are the same)."""

    def __init__(
        self, settings: Settings, now: float, cpu_metric: str = "cpu", refresh: int | None = None
    ) -> None:
        super().__init__(settings, now, cpu_metric, refresh)
        self._due: tuple[Snapshot, float] | None = None

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

    def filter(self, pod: PodSpec, names: Sequence[str], now: float) -> list[str]:
        self.ready()
        return super().filter(pod, names, now)

    def prioritize(self, pod: PodSpec, names: Sequence[str], now: float) -> dict[str, int]:
        self.ready()
        return super().prioritize(pod, names, now)

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        self.ready()
        super().bound(pod, node, now)


class SchedulerModel:
    """One scheduler profile (and its extender, if any) as the replay drives it. Times
    given to it are seconds into the replay; the engine's clock reads EPOCH + those."""

    def __init__(self, name: str, scheduler: KubeScheduler) -> None:
        self.name = name
        self.scheduler = scheduler

    def add_node(self, node: ReplayNode) -> None:
        cpu = round(node.cores * 1000)
        self.scheduler.nodes[node.name] = NodeRequests(node.name, cpu, node.memory, node.max_pods)

    def remove_node(self, name: str) -> None:
        self.scheduler.nodes.pop(name, None)

    def observe(self, t: float, feeds: Feeds) -> None:
        self.scheduler.observe(t, EPOCH + t, feeds)

    def schedule(self, pod: PodSpec, t: float) -> str | None:
        return self.scheduler.schedule(pod, EPOCH + t)

    def unbind(self, pod: PodSpec, node: str, t: float) -> None:
        self.scheduler.unbind(pod, node, EPOCH + t)

    def occupy(self, pod: PodSpec, node: str) -> None:
        """A pod that keeps its real node (another scheduler's, pinned, or placed before the
        range): kube-scheduler's cache counts its requests all the same."""
        cache = self.scheduler.nodes.get(node)
        if cache is not None:
            cache.add(pod.cpu_milli, pod.memory, pod.replicaset)

    def vacate(self, pod: PodSpec, node: str) -> None:
        cache = self.scheduler.nodes.get(node)
        if cache is not None:
            cache.remove(pod.cpu_milli, pod.memory, pod.replicaset)


@dataclass(frozen=True, slots=True)
class Options:
    seed: int = 1
    """Tie-break RNGs (`select-host:<seed>`, as the simulation's)."""
    max_hosts: int | None = None
    weight: int = DEFAULT_WEIGHT
    cpu_metric: str = "cpu"
    refresh: int = 15
    """Our refresher's interval (the policy's prometheus.interval)."""


def build(name: str, settings: Settings, options: Options, defer: bool = True) -> SchedulerModel:
    """A fresh model of that name for one run, as the simulation's profile builds it; its
    extender, if any, defers its installs (`defer`)."""
    policy = with_max_hosts(settings, options.max_hosts)
    scheduler = profiles.build(
        name, options.seed, policy, options.weight, options.cpu_metric, options.refresh
    )
    if defer and scheduler.extender is not None:
        scheduler.extender = DeferredExtender(policy, EPOCH, options.cpu_metric, options.refresh)
    return SchedulerModel(name, scheduler)
