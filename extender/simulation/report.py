"""Runs into a report: per scenario and metric, every scheduler side by side, over seeds,
then the targets' verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from extender.simulation.experiment import Plan, Runs
from extender.simulation.profiles import DECICE, KUBE_SCHEDULER, SHORT
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import DRAIN_SECONDS
from extender.simulation.scenarios import SCENARIOS, Size
from extender.simulation.summary import ScenarioReport, Spread, scenario_report
from extender.simulation.targets import Verdict, judge
from extender.simulation.workload import distribution_text


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _peak(x: float) -> str:
    return "-" if x < 0 else f"{100 * x:.1f}"


def _count(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.1f}"


ROWS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("node_minutes_hot", "node-minutes above 90% CPU", lambda x: f"{x:.0f}"),
    ("placed_on_hot", "pods placed on a node above 90%", _count),
    ("cpu_p95", "p95 node CPU %", _pct),
    ("cpu_max", "max node CPU %", _pct),
    ("demand_p95", "p95 node CPU demand % (uncapped)", _pct),
    ("demand_max", "max node CPU demand % (uncapped)", _pct),
    ("cpu_std", "sd of CPU across nodes, pp (time avg)", _pct),
    ("exceedance", "placements followed by >90% in 5 min, %", _pct),
    ("unplaced", "pods left unplaced", _count),
    ("waited", "pods placed after waiting", _count),
    ("wait_p95", "p95 minutes those pods waited", lambda x: f"{x:.1f}"),
    ("wait_max", "max minutes a pod waited", lambda x: f"{x:.1f}"),
    ("wait_minutes", "pod-wait minutes (unplaced included)", lambda x: f"{x:.0f}"),
    ("moved", "pods moved by the rebalancer", _count),
    ("peak_1sd", "peak +1 sd exceeded 5 min on, % (G 15.9)", _peak),
    ("peak_2sd", "peak +2 sd exceeded 5 min on, % (G 2.3)", _peak),
    ("peak_3sd", "peak +3 sd exceeded 5 min on, % (G 0.13)", _peak),
)
"""(Metrics field, label, format) for the table, in order."""
NO_CHANGE = frozenset({"peak_1sd", "peak_2sd", "peak_3sd"})
"""Rows shown without a change (kube-scheduler predicts no peak)."""


@dataclass(frozen=True, slots=True)
class Report:
    plan: Plan
    policy: str
    scenarios: tuple[ScenarioReport, ...]
    verdicts: tuple[Verdict, ...]


def build_report(
    plan: Plan, policy: str, results: Mapping[str, Sequence[Runs]], descriptions: Mapping[str, str]
) -> Report:
    scenarios = tuple(
        scenario_report(name, descriptions.get(name, ""), runs) for name, runs in results.items()
    )
    return Report(plan, policy, scenarios, tuple(judge(scenarios)))


def describe(results: Mapping[str, Sequence[Runs]], size: Size) -> dict[str, str]:
    return {
        name: SCENARIOS[name](runs[0].seed, size).description
        for name, runs in results.items()
        if runs
    }


def _cell(s: Spread, fmt: Callable[[float], str], seeds: int) -> str:
    return fmt(s.mean) if seeds == 1 else f"{fmt(s.mean)} ± {fmt(s.sd)}"


def change(base: float, value: float) -> str:
    if base == 0:
        return "=" if value == 0 else "new"
    return f"{100 * (value - base) / base:+.0f}%"


def compared(key: str, text: str, value: float, base: float | None) -> str:
    """A cell with its change against kube-scheduler's `base` (None: none shown)."""
    if base is None or key in NO_CHANGE:
        return text
    return f"{text} {change(base, value):>5}"


def table(columns: Mapping[str, Sequence[str]]) -> list[str]:
    rows = [[SHORT.get(n, n) for n in columns], *map(list, zip(*columns.values(), strict=True))]
    labels = ["", *(label for _, label, _ in ROWS)]
    width = max(map(len, labels))
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return [
        f"  {label:<{width}}" + "".join(f"  {c:>{w}}" for c, w in zip(row, widths, strict=True))
        for label, row in zip(labels, rows, strict=True)
    ]


def hosts_text(max_hosts: int | None) -> str:
    return "policy's" if max_hosts is None else (str(max_hosts) if max_hosts else "all")


def pipeline_text(p: Pipeline) -> str:
    fast = f"raw rate window {p.fast_window}s" if p.fast_window else "no raw rate"
    return (
        f"metrics: scrape {p.scrape_interval}s, rate window {p.rate_window}s, rule eval "
        f"{p.rule_interval}s, {fast}, refresh {p.refresh_interval}s"
    )


def block(sc: ScenarioReport, seeds: int, plain: Collection[str] = (KUBE_SCHEDULER,)) -> list[str]:
    """The scenario's table; a column of `plain` shows no change against kube-scheduler."""
    base = sc.baseline
    columns = {
        n: [
            compared(
                key,
                _cell(figures[key], fmt, seeds),
                figures[key].mean,
                base[key].mean if base is not None and n not in plain else None,
            )
            for key, _, fmt in ROWS
        ]
        for n, figures in sc.schedulers.items()
    }
    return table(columns)


def render(report: Report) -> str:
    plan, size = report.plan, report.plan.size
    seeds = len(plan.seeds)
    seed_text = f"{seeds} seeds ({plan.seeds[0]}..{plan.seeds[-1]}), mean ± sd"
    seed_text = f"seed {plan.seeds[0]}" if seeds == 1 else seed_text
    lines = [
        f"decice-extender simulate: {size.nodes} nodes, {seed_text}; policy {report.policy}, "
        f"maxHosts {hosts_text(plan.max_hosts)}, extender weight {plan.weight}",
        f"{pipeline_text(plan.pipeline)}; warm-up {size.warmup / 60:g} min, measured "
        f"{size.duration / 60:g} min, then {DRAIN_SECONDS / 60:g} min for the waiting pods "
        "(unplaced: still waiting then); node CPU capped at 100% (demand uncapped); change: "
        "against kube-scheduler alone",
    ]
    for sc in report.scenarios:
        mean = next(iter(sc.schedulers.values()))["pods"].mean
        pods = f"{mean:.0f} pods" + (" a run on average" if mean != int(mean) else "")
        drawn = f"; as drawn for seed {sc.seeds[0]}" if seeds > 1 else ""
        lines += ["", f"{sc.name}: {sc.description} ({pods}{drawn})", *block(sc, seeds)]
        left = {n: k for n, k in sc.unplaced_only.items() if k}
        if left:
            listed = ", ".join(f"{SHORT.get(n, n)} {k}" for n, k in left.items())
            lines.append(f"  pods kube-scheduler placed and another left unplaced: {listed}")
    lines += ["", "targets:"]
    for v in report.verdicts:
        mark = {True: "MET   ", False: "MISSED", None: "n/a   "}[v.met]
        lines.append(f"  {mark} {v.target}: {v.detail}")
    lines += ["", "workload (the simulation's claim about a cluster):"]
    lines += [f"  {line}" for line in distribution_text().splitlines()]
    return "\n".join(lines)


def figures(spreads: Mapping[str, Spread]) -> dict[str, Any]:
    return {k: asdict(s) for k, s in spreads.items()}


def plan_json(p: Pipeline, max_hosts: int | None, weight: int, cpu: str) -> dict[str, Any]:
    pipeline = {**asdict(p), "tick": p.tick}
    return {"pipeline": pipeline, "maxHosts": max_hosts, "extenderWeight": weight, "cpuMetric": cpu}


def to_json(report: Report) -> dict[str, Any]:
    """`--json FILE`'s document; `baseline` and `ours` are old names, kept for one release."""
    plan = report.plan
    scenarios: dict[str, Any] = {}
    for sc in report.scenarios:
        doc: dict[str, Any] = {
            "description": sc.description,
            "seeds": list(sc.seeds),
            "schedulers": {n: figures(s) for n, s in sc.schedulers.items()},
            "unplacedOnly": dict(sc.unplaced_only),
            "overcommitted": sc.overcommitted,
        }
        if sc.baseline is not None:
            doc["baseline"] = figures(sc.baseline)
        if sc.ours is not None:
            doc["ours"] = figures(sc.ours)
            doc["unplacedOnlyOurs"] = sc.unplaced_only.get(DECICE, 0)
        scenarios[sc.name] = doc
    return {
        "plan": {
            "scenarios": list(plan.scenarios),
            "seeds": list(plan.seeds),
            "schedulers": list(plan.schedulers),
            "size": asdict(plan.size),
            **plan_json(plan.pipeline, plan.max_hosts, plan.weight, plan.cpu_metric),
            "policy": report.policy,
        },
        "distribution": distribution_text(),
        "scenarios": scenarios,
        "targets": [asdict(v) for v in report.verdicts],
    }
