"""The replay's report: the simulation's table, real placements first; the JSON simulate's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.replay.fidelity import FAR, Fidelity
from extender.replay.model import History
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
