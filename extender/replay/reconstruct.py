"""Facts into a History: arrivals, requests, each pod's use from its start, each node's
background (its CPU less the replayed pods' use, clamped at 0). Pure.

A pod arrives at kube_pod_created, is bound at its scheduled time (else its start), uses
CPU from its start time and ends at its completion or deletion, else where its
kube_pod_info series ends. Pods are replayed (Role.REPLAYED) when created in the measured
range, bound, by a scheduler of `schedulers`, not pinned, in `namespaces` (all if none).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from extender.replay.facts import Facts, NodeFacts, PodFacts, Trace
from extender.replay.model import Grid, History, ReplayNode, ReplayPod, Role

DEFAULT_SCHEDULER = "default-scheduler"
NON_ZERO_CPU, NON_ZERO_MEMORY = 100, 200 * 1024 * 1024
"""kubernetes pkg/scheduler/util/pod_resources.go: requests for a pod asking nothing."""
PINNED_KINDS = {"daemonset": "DaemonSet", "staticpod": "static pod"}
PINNED_CREATORS = {"DaemonSet": "DaemonSet", "Node": "static pod"}


@dataclass(frozen=True, slots=True)
class Selection:
    """Pods outside its namespaces (empty: all) or of other schedulers keep their node."""

    namespaces: frozenset[str] = frozenset()
    schedulers: frozenset[str] = field(default_factory=lambda: frozenset({DEFAULT_SCHEDULER}))


def reconstruct(facts: Facts, selection: Selection) -> History:
    grid = facts.grid
    notes: list[str] = []
    nodes = {n.name: node for n in facts.nodes.values() if (node := _node(n, grid, notes))}
    pods = [p for f in facts.pods.values() if (p := _pod(f, facts, selection, notes))]
    pods.sort(key=lambda p: (p.arrival, p.namespace, p.name, p.uid))
    _subtract(nodes, pods, grid, notes)
    if "scheduler" not in facts.seen:
        notes.append(
            "kube_pod_scheduler has no series (kube-state-metrics before v2.11): every pod "
            f"is taken as {', '.join(sorted(selection.schedulers))}'s"
        )
    if "selectors" not in facts.seen:
        notes.append(
            "kube_pod_nodeselectors has no series (kube-state-metrics opt-in: "
            "--metric-opt-in-list=kube_pod_nodeselectors): pods with a nodeSelector cannot "
            "be told apart, and are replayed"
        )
    return History(grid, nodes, pods, notes)


def filled(values: Iterable[float]) -> array[float]:
    """Gaps (NaN) take the last value before them; leading ones the first value."""
    out = array("f", values)
    first = next((v for v in out if not math.isnan(v)), 0.0)
    last = first
    for i, v in enumerate(out):
        if math.isnan(v):
            out[i] = last
        else:
            last = v
    return out


def _node(facts: NodeFacts, grid: Grid, notes: list[str]) -> ReplayNode | None:
    trace = facts.cpu
    if facts.cores is None or facts.cores <= 0:
        if trace is not None:
            notes.append(f"node {facts.name}: CPU values but no allocatable CPU: left out")
        return None
    if trace is None or all(math.isnan(v) for v in trace.values):
        notes.append(f"node {facts.name}: no CPU values from the policy's query: left out")
        return None
    present = [i for i, v in enumerate(trace.values) if not math.isnan(v)]
    first, last = trace.first + present[0], trace.first + present[-1]
    cpu = filled(trace.values[present[0] : present[-1] + 1])
    background = array("d", bytes(8 * grid.steps))
    for i, u in enumerate(cpu):
        background[first + i] = u * facts.cores
    return ReplayNode(
        name=facts.name,
        cores=facts.cores,
        memory=facts.memory,
        max_pods=facts.max_pods,
        first=first,
        last=last,
        background=background,
        taints=tuple(sorted(facts.taints)),
    )


def pod_times(f: PodFacts, facts: Facts, trace: Trace | None) -> tuple[float, float, float, float]:
    """(arrival, bound, start, end) from what is known, best source first."""
    grid = facts.grid
    arrival = f.created if f.created is not None else f.first_seen
    first_bound = min(f.nodes.values(), default=math.inf) - facts.window
    start = f.started
    if start is None:
        start = grid.time(trace.first) if trace is not None else max(arrival, first_bound)
    start = max(start, arrival)
    bound = min(f.scheduled if f.scheduled is not None else start, start)
    ends = [t for t in (f.completed, f.deleted) if t is not None]
    if ends:
        end = min(ends)
    else:
        end = f.last_seen
        if f.tail is not None:  # the last window can reach past the range: count in it
            seen, count = f.tail
            end = min(seen, max(seen - facts.window, bound) + count * facts.scrape)
        if end >= grid.end - grid.step - facts.scrape:
            end = grid.end  # still there when the range ends
    return arrival, max(bound, arrival), start, max(end, start)


def _role(f: PodFacts, arrival: float, grid: Grid, selection: Selection) -> tuple[Role, str]:
    if f.node is None:
        return Role.NEVER_RAN, "Pending throughout"
    if arrival < grid.measured_start:
        return Role.EARLIER, "created before --from"
    if f.scheduler is not None and f.scheduler not in selection.schedulers:
        return Role.OTHER_SCHEDULER, f"scheduler {f.scheduler}"
    pinned = PINNED_KINDS.get(f.workload_type) or PINNED_CREATORS.get(f.created_by)
    if pinned is not None:
        return Role.PINNED, pinned
    if f.selectors:
        return Role.PINNED, f"nodeSelector {','.join(f.selectors)}"
    if selection.namespaces and f.namespace not in selection.namespaces:
        return Role.OUTSIDE, f"namespace {f.namespace}"
    return Role.REPLAYED, ""


def _pod(f: PodFacts, facts: Facts, selection: Selection, notes: list[str]) -> ReplayPod | None:
    grid = facts.grid
    trace = facts.usage.get((f.namespace, f.name))
    arrival, bound, start, end = pod_times(f, facts, trace)
    if arrival >= grid.end or end < grid.start:
        return None
    role, why = _role(f, arrival, grid, selection)
    cpu, memory = round(f.cpu * 1000), round(f.memory)
    if cpu == 0 and memory == 0:
        cpu, memory = NON_ZERO_CPU, NON_ZERO_MEMORY
    pod = ReplayPod(
        namespace=f.namespace,
        name=f.name,
        uid=f.uid or f"{f.namespace}/{f.name}",
        role=role,
        why=why,
        node=f.node,
        arrival=arrival,
        bound=bound,
        start=start,
        end=min(end, grid.end),
        cpu_milli=cpu,
        memory=memory,
        workload=f.workload,
        tolerations=tuple(sorted(f.tolerations)),
    )
    if role is Role.REPLAYED:
        pod.usage = _usage(pod, trace, grid, notes)
    return pod


def use_step(pod: ReplayPod, grid: Grid) -> int:
    return max(0, grid.index(pod.start))


def _usage(pod: ReplayPod, trace: Trace | None, grid: Grid, notes: list[str]) -> array[float]:
    first = use_step(pod, grid)
    last = min(grid.steps - 1, grid.index(pod.end - 1e-6))
    if last < first:
        return array("f")
    if trace is None:
        notes.append(f"pod {pod.key}: no measured use (the usage rule has no series): 0 cores")
        return array("f", bytes(4 * (last - first + 1)))
    return filled(trace.at(k) for k in range(first, last + 1))


def _subtract(
    nodes: dict[str, ReplayNode], pods: list[ReplayPod], grid: Grid, notes: list[str]
) -> None:
    elsewhere = 0
    for pod in pods:
        if pod.role is not Role.REPLAYED or not pod.usage:
            continue
        node = nodes.get(pod.node or "")
        if node is None:
            elsewhere += 1
            continue
        background, k0 = node.background, use_step(pod, grid)
        for k in range(max(k0, node.first), min(k0 + len(pod.usage), node.last + 1)):
            background[k] -= pod.usage[k - k0]
    clamped = 0
    for node in nodes.values():
        background = node.background
        for k in range(node.first, node.last + 1):
            if background[k] < 0:
                background[k] = 0.0
                clamped += 1
    if clamped:
        notes.append(
            f"{clamped} node-steps where the replayed pods' measured use exceeded the node's "
            "CPU (the rules are sampled apart): background clamped at 0"
        )
    if elsewhere:
        notes.append(
            f"{elsewhere} replayed pods ran on nodes without CPU values: their real use is "
            "not subtracted anywhere"
        )
