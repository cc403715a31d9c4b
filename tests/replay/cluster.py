"""The history the replay's integration tests backfill: three hours of a small cluster
whose pods kube-scheduler placed, making a hot spot worse.

Five nodes of 4 cores. node-1 carries unseen work (another tenant's batch job, run
outside Kubernetes: 72 % of its cores); the others 25 %. A Deployment `shop/web` scales
up a pod every four minutes, each requesting 100m and using half a core, each running
45 minutes. kube-scheduler places them by requests alone (the known rule:
`place_like_kube_scheduler`, the simulation's model of its default profile, ties broken
by a seeded RNG), so node-1 gets its share and runs above 90 % for most of the
range. Around them, every kind of pod the replay must leave where it was: node-exporter's
DaemonSet pods, pods created before the range, one of another scheduler, one that never
fits (Pending throughout), a completed Job pod.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from extender.replay.driver import TEMPLATE_HASH
from extender.simulation.scheduler import KubeScheduler
from extender.simulation.workload import NodeSpec, PodSpec
from tests.harness.clusterhistory import GIB, ClusterHistory, Node, Pod, node_exporter_pods

STEP = 30
HOURS = 3
HOT = "node-1"
HOT_LEVEL, CALM_LEVEL = 0.72, 0.25
LEAD = 10 * 60
"""The replay's lead-in: --from is this much (and 10 more minutes) after the history starts."""


@dataclass(frozen=True)
class Backfilled:
    history: ClusterHistory
    start: float
    """--from."""
    end: float
    """--to."""


def hot_spot(end: float | None = None) -> Backfilled:
    """The history, ending `end` (default: 10 minutes ago, on a step)."""
    if end is None:
        end = math.floor(time.time() / STEP) * STEP - 600
    start = end - HOURS * 3600
    nodes = [
        Node(
            f"node-{i}",
            4.0,
            f"10.0.0.{10 + i}",
            background=((0.0, HOT_LEVEL if i == 1 else CALM_LEVEL),),
        )
        for i in range(1, 6)
    ]
    history = ClusterHistory(start, end, nodes, scrape=STEP)
    pods = node_exporter_pods(history)
    pods += [  # created before the replayed range: they keep their node
        _web("api", i, start - 3600, 0.25, 0.2, deployment="api", end=None) for i in range(3)
    ]
    first = start + LEAD + 600
    pods += [
        _web("web", i, first + 240 * i, 0.1, 0.5, deployment="web", end=first + 240 * i + 2700)
        for i in range(int((end - 1800 - first) // 240))
    ]
    pods.append(
        Pod("batch", "other-0", first + 300, 0.5, 0.3, node="node-2", scheduler="my-scheduler",
            owner_kind="", owner_name="")
    )  # fmt: skip
    pods.append(Pod("shop", "huge-0", first + 600, 64.0, 1.0, owner_kind="", owner_name=""))
    pods.append(
        Pod("batch", "report-0", first + 900, 0.2, 0.1, end=first + 2700, completed=True,
            owner_kind="Job", owner_name="report")
    )  # fmt: skip
    history.pods = pods
    place_like_kube_scheduler(history, random.Random("history:1"))
    return Backfilled(history, start + LEAD + 600, end)


def _web(
    app: str, i: int, created: float, cpu: float, use: float, deployment: str, end: float | None
) -> Pod:
    return Pod(
        "shop",
        f"{app}-5f7c9-{i:02d}",
        created,
        cpu,
        use,
        end=end,
        memory=GIB // 4,
        owner_kind="ReplicaSet",
        owner_name=f"{deployment}-5f7c9",
        deployment=deployment,
    )


def _spec(pod: Pod) -> PodSpec:
    """The pod as the replay hands it to the models (a Deployment's pods share a workload)."""
    workload = f"{pod.namespace}.{pod.deployment}" if pod.deployment else ""
    hash_ = TEMPLATE_HASH if workload else ""
    return PodSpec(pod.uid, round(pod.cpu * 1000), pod.memory, pod.use, pod.created, 0.0,
                   workload=workload, template_hash=hash_)  # fmt: skip


def place_like_kube_scheduler(history: ClusterHistory, rng: random.Random) -> None:
    """Bind every pod without a node the way kube-scheduler's default profile would, as
    the simulation models it (extender.simulation.scheduler.KubeScheduler: NodeResourcesFit,
    BalancedAllocation, PodTopologySpread): in creation order (pods created in the same
    second in the replay's order, by namespace and name), with the pods that ended
    before each one gone; a pod that fits nowhere stays Pending. Pods that name a node keep
    it, counted in the scheduler's cache."""
    scheduler = KubeScheduler(rng)
    for n in history.nodes:
        scheduler.add_node(NodeSpec(n.name, round(n.cores), n.memory))
    running: list[Pod] = []
    for pod in sorted(history.pods, key=lambda p: (p.created, p.namespace, p.name)):
        for gone in [p for p in running if p.end is not None and p.end <= pod.created]:
            running.remove(gone)
            assert gone.node is not None
            scheduler.unbind(_spec(gone), gone.node, gone.end or 0.0)
        spec = _spec(pod)
        if pod.node is None:
            pod.node = scheduler.schedule(spec, pod.created)
            if pod.node is None:
                continue  # Pending throughout
        else:
            scheduler.nodes[pod.node].add(spec.cpu_milli, spec.memory, spec.replicaset)
        if pod.bound is None:
            pod.bound = pod.created + 2.0
            pod.start = pod.bound + 3.0
        running.append(pod)


def truth_hot_minutes(history: ClusterHistory, start: float, end: float) -> float:
    """Node-minutes above 90 % CPU at each step of [start, end), from the description."""
    steps = [start + i * STEP for i in range(int((end - start) // STEP))]
    hot = sum(1 for t in steps for n in history.nodes if history.utilisation(n, t) > 0.9)
    return hot * STEP / 60
