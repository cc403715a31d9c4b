"""The replay's report: the simulation's table, real placements first; the JSON simulate's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.replay.model import History, Role
from extender.replay.models import KUBE_SCHEDULER, REAL, Options
from extender.replay.problems import when
from extender.simulation.experiment import Runs
from extender.simulation.prometheus import Pipeline
from extender.simulation.report import block, figures, hosts_text, pipeline_text, plan_json
from extender.simulation.run import RunResult
from extender.simulation.summary import ScenarioReport, scenario_report

LABELS = {
    "node_minutes_hot": "hot node-minutes",
    "cpu_p95": "p95 node CPU",
    "cpu_std": "spread across nodes",
}


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
    """Is the kube-scheduler model faithful here? Beyond FAR from the real row, something the
    models leave out shaped the real placements: `why` names its traces."""
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


@dataclass(frozen=True, slots=True)
class Setup:
    url: str
    policy: str
    start: float
    end: float
    step: float
    lead: float
    pipeline: Pipeline
    namespaces: tuple[str, ...]
    schedulers: tuple[str, ...]
    options: Options


@dataclass(frozen=True, slots=True)
class ReplayReport:
    setup: Setup
    history: History
    runs: Mapping[str, RunResult]
    fidelity: Fidelity
    notes: tuple[str, ...]


def roles(history: History) -> dict[str, int]:
    return dict(Counter(pod.role.value for pod in history.pods))


def render(report: ReplayReport) -> str:
    s, history = report.setup, report.history
    days = (s.end - s.start) / 86400
    lines = [
        f"decice-extender replay: {s.url}, {when(s.start)} .. {when(s.end)} ({days:.2f} days), "
        f"step {s.step:g}s; policy {s.policy}, maxHosts {hosts_text(s.options.max_hosts)}, "
        f"extender weight {s.options.weight}",
        f"{pipeline_text(s.pipeline)}; lead-in {s.lead / 60:g} min; node CPU capped at 100% "
        "(demand uncapped); change: against kube-scheduler alone",
        f"history: {len(history.nodes)} nodes, {len(history.pods)} pods ("
        + ", ".join(f"{n} {role}" for role, n in roles(history).items())
        + ")",
        "",
        *block(summary(report.runs), 1, (KUBE_SCHEDULER, REAL)),
        "",
        *fidelity_lines(report),
    ]
    if report.notes:
        lines += ["", "notes:", *(f"  {n}" for n in report.notes)]
    return "\n".join(lines)


def summary(runs: Mapping[str, RunResult]) -> ScenarioReport:
    return scenario_report("replay", "", [Runs(1, runs)])


def fidelity_lines(report: ReplayReport) -> list[str]:
    f = report.fidelity
    if REAL not in report.runs or KUBE_SCHEDULER not in report.runs:
        return []
    real, model = report.runs[REAL].metrics, report.runs[KUBE_SCHEDULER].metrics
    apart = ", ".join(
        f"{LABELS[k]} {_figure(k, getattr(model, k))} vs {_figure(k, getattr(real, k))}"
        for k in f.differences
    )
    head = (
        f"kube-scheduler model vs as it happened: {100 * f.distance:.0f}% apart ({apart}); "
        f"{100 * f.same_node:.0f}% of replayed pods on their real node"
    )
    if not f.far:
        return [head + f": faithful (within {100 * FAR:.0f}%)"]
    return [
        head,
        f"warning: more than {100 * FAR:.0f}% apart: the replay is not to be trusted on this "
        "history; why it may be:",
        *(f"  {line}" for line in f.why),
    ]


def _figure(key: str, value: float) -> str:
    return f"{value:.0f}" if key == "node_minutes_hot" else f"{100 * value:.1f}%"


def to_json(report: ReplayReport) -> dict[str, Any]:
    s = report.setup
    keys = {p.uid: p.key for p in report.history.pods}
    return {
        "plan": {
            "prometheus": s.url,
            "from": when(s.start),
            "to": when(s.end),
            "step": s.step,
            "leadIn": s.lead,
            "namespaces": list(s.namespaces),
            "schedulerNames": list(s.schedulers),
            **plan_json(s.pipeline, s.options.max_hosts, s.options.weight, s.options.cpu_metric),
            "policy": s.policy,
            "seeds": [s.options.seed],
        },
        "history": {"nodes": len(report.history.nodes), "pods": roles(report.history)},
        "scenarios": {
            "replay": {
                "description": f"{when(s.start)} .. {when(s.end)} as recorded at {s.url}",
                "seeds": [s.options.seed],
                "schedulers": {n: figures(f) for n, f in summary(report.runs).schedulers.items()},
                "unplacedPods": {
                    name: sorted(keys.get(u, u) for u in run.unplaced)
                    for name, run in report.runs.items()
                },
                "overcommitted": sum(run.overcommitted for run in report.runs.values()),
            }
        },
        "fidelity": {
            "distance": report.fidelity.distance,
            "differences": report.fidelity.differences,
            "sameNode": report.fidelity.same_node,
            "far": report.fidelity.far,
            "why": list(report.fidelity.why),
        },
        "notes": list(report.notes),
    }
