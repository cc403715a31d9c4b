"""Runs into the replay's report: the simulation's table, one column per scheduler.

The rows are the simulation's (extender.simulation.report.ROWS), so a replay reads like a
simulated scenario; the first column is what happened. The JSON has `simulate --json`'s
shape: one scenario ("replay") whose `schedulers` map each name to the same figures, each
a spread over the one run (mean = low = high = the value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from extender.replay.fidelity import FAR, Fidelity
from extender.replay.model import History, Role
from extender.replay.models import KUBE_SCHEDULER, REAL
from extender.replay.problems import when
from extender.simulation.profiles import SHORT
from extender.simulation.prometheus import Pipeline
from extender.simulation.report import NO_CHANGE, ROWS
from extender.simulation.run import RunResult
from extender.simulation.summary import spread

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
    max_hosts: int | None
    weight: int
    cpu_metric: str
    seed: int


@dataclass(frozen=True, slots=True)
class ReplayReport:
    setup: Setup
    history: History
    runs: Mapping[str, RunResult]
    """Scheduler name -> its run, the real placements first."""
    fidelity: Fidelity
    notes: tuple[str, ...]


def roles(history: History) -> dict[str, int]:
    out: dict[str, int] = {}
    for pod in history.pods:
        out[pod.role.value] = out.get(pod.role.value, 0) + 1
    return out


def _change(base: float, value: float) -> str:
    if base == 0:
        return "=" if value == 0 else "new"
    return f"{100 * (value - base) / base:+.0f}%"


def render(report: ReplayReport) -> str:
    s, history = report.setup, report.history
    days = (s.end - s.start) / 86400
    p = s.pipeline
    hosts = "policy's" if s.max_hosts is None else (str(s.max_hosts) if s.max_hosts else "all")
    fast = f"raw rate window {p.fast_window}s" if p.fast_window else "no raw rate"
    lines = [
        f"decice-extender replay: {s.url}, {when(s.start)} .. {when(s.end)} ({days:.2f} days), "
        f"step {s.step:g}s; policy {s.policy}, maxHosts {hosts}, extender weight {s.weight}",
        f"metrics: scrape {p.scrape_interval}s, rate window {p.rate_window}s, rule eval "
        f"{p.rule_interval}s, {fast}, refresh {p.refresh_interval}s; lead-in "
        f"{s.lead / 60:g} min; node CPU capped at 100% (demand uncapped); change: against "
        "kube-scheduler alone",
        f"history: {len(history.nodes)} nodes, {len(history.pods)} pods ("
        + ", ".join(f"{n} {role}" for role, n in roles(history).items())
        + ")",
        "",
        *table(report.runs),
        "",
        *fidelity_lines(report),
    ]
    if report.notes:
        lines += ["", "notes:", *(f"  {n}" for n in report.notes)]
    return "\n".join(lines)


def table(runs: Mapping[str, RunResult]) -> list[str]:
    """The simulation's rows, a column per run, each value with its change against
    kube-scheduler's (but kube-scheduler's own and the real placements')."""
    names = list(runs)
    base = runs.get(KUBE_SCHEDULER)
    rows = [[SHORT.get(n, n) for n in names]]
    for key, _, fmt in ROWS:
        row = []
        for n in names:
            value = float(getattr(runs[n].metrics, key))
            text = fmt(value)
            if base is not None and n not in (KUBE_SCHEDULER, REAL) and key not in NO_CHANGE:
                text += f" {_change(float(getattr(base.metrics, key)), value):>5}"
            row.append(text)
        rows.append(row)
    width = max(len(label) for _, label, _ in ROWS)
    widths = [max(len(r[i]) for r in rows) for i in range(len(names))]
    labels = ["", *(label for _, label, _ in ROWS)]
    return [
        f"  {label:<{width}}" + "".join(f"  {c:>{w}}" for c, w in zip(row, widths, strict=True))
        for label, row in zip(labels, rows, strict=True)
    ]


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
            "pipeline": {**asdict(s.pipeline), "tick": s.pipeline.tick},
            "maxHosts": s.max_hosts,
            "extenderWeight": s.weight,
            "cpuMetric": s.cpu_metric,
            "policy": s.policy,
            "seeds": [s.seed],
        },
        "history": {"nodes": len(report.history.nodes), "pods": roles(report.history)},
        "scenarios": {
            "replay": {
                "description": f"{when(s.start)} .. {when(s.end)} as recorded at {s.url}",
                "seeds": [s.seed],
                "schedulers": {name: figures(run) for name, run in report.runs.items()},
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


def figures(run: RunResult) -> dict[str, Any]:
    """Metrics field -> its spread over the one run (simulate --json's cell)."""
    return {k: asdict(spread([float(v)])) for k, v in asdict(run.metrics).items()}


def replayed_count(history: History) -> int:
    return sum(1 for p in history.pods if p.role is Role.REPLAYED)
