"""Is the kube-scheduler model faithful on this history? Beyond FAR from the real row,
something the models leave out shaped the real placements: its traces are named.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.replay.model import History, Role
from extender.simulation.run import RunResult

FAR = 0.25
NAMED = 5  # pods or nodes named per line


@dataclass(frozen=True, slots=True)
class Fidelity:
    distance: float
    differences: dict[str, float]  # metrics field -> |model - real| / max(real, a floor)
    same_node: float
    far: bool
    why: tuple[str, ...]


def fidelity(real: RunResult, model: RunResult, history: History) -> Fidelity:
    a, b = real.metrics, model.metrics
    grid = history.grid
    nodes = history.nodes.values()
    steps = sum(max(0, n.last - max(n.first, grid.measured_from) + 1) for n in nodes)
    floor_hot = max(1.0, 0.005 * (steps * grid.step / 60))  # of the node-minutes measured
    differences = {
        "node_minutes_hot": abs(b.node_minutes_hot - a.node_minutes_hot)
        / max(a.node_minutes_hot, floor_hot),
        "cpu_p95": abs(b.cpu_p95 - a.cpu_p95) / max(a.cpu_p95, 0.01),
        "cpu_std": abs(b.cpu_std - a.cpu_std) / max(a.cpu_std, 0.01),
    }
    replayed = [p for p in history.pods if p.role is Role.REPLAYED]
    same = sum(1 for p in replayed if model.placements.get(p.uid) == p.node)
    distance = max(differences.values())
    far = distance > FAR
    return Fidelity(
        distance=distance,
        differences=differences,
        same_node=same / len(replayed) if replayed else 1.0,
        far=far,
        why=tuple(constraints(history)) if far else (),
    )


def constraints(history: History) -> list[str]:
    lines = [
        "not modelled: node affinity, pod (anti-)affinity, topology spread constraints, "
        "taints and tolerations, volume and port constraints"
    ]
    pods = [(p.key, p.tolerations) for p in history.pods if p.role is Role.REPLAYED]
    nodes = [(n.name, n.taints) for n in history.nodes.values()]
    for what, items in (
        ("replayed pods tolerate taints", pods),
        ("nodes carry NoSchedule/NoExecute taints", nodes),
    ):
        named = [(name, keys) for name, keys in items if keys]
        if named:
            listed = "; ".join(f"{name} ({', '.join(keys)})" for name, keys in named[:NAMED])
            lines.append(f"{len(named)} {what}: {listed}" + (" ..." if len(named) > NAMED else ""))
    lines.append(
        "kube-state-metrics exports no affinity nor topology spread: look for Deployments "
        "with affinity or topologySpreadConstraints among the replayed pods' workloads"
    )
    return lines
