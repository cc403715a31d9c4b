"""Runs into a report: per scenario and metric, kube-scheduler beside ours, over seeds.

One seed is one sample of a noisy system, so every figure is a mean with its spread (the
sample standard deviation and the range over seeds), and the JSON keeps each seed's value
for anyone who wants another statistic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from extender.simulation.experiment import Pair, Plan
from extender.simulation.scenarios import SCENARIOS, Size
from extender.simulation.stats import Metrics
from extender.simulation.targets import Verdict, judge
from extender.simulation.workload import distribution_text

SIDES = ("baseline", "ours")
LABELS = {"baseline": "kube-scheduler", "ours": "+ decice extender"}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


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
    ("unplaced", "pods left unplaced", _count),
    ("waited", "pods placed after waiting", _count),
)
"""(Metrics field, label, format) for the table, in order."""


@dataclass(frozen=True, slots=True)
class Spread:
    mean: float
    sd: float
    """Sample standard deviation over seeds (0 with one seed)."""
    low: float
    high: float
    values: tuple[float, ...]


def spread(values: Sequence[float]) -> Spread:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return Spread(mean, sd, min(values), max(values), tuple(values))


def side_spreads(metrics: Sequence[Metrics]) -> dict[str, Spread]:
    """Metrics field -> its spread over seeds."""
    rows = [asdict(m) for m in metrics]
    return {key: spread([float(r[key]) for r in rows]) for key in rows[0]}


@dataclass(frozen=True, slots=True)
class ScenarioReport:
    name: str
    description: str
    seeds: tuple[int, ...]
    baseline: Mapping[str, Spread]
    ours: Mapping[str, Spread]
    unplaced_only_ours: int
    """Pods the baseline placed and ours left unplaced, summed over seeds."""
    overcommitted: int
    """Bindings past a node's allocatable, both schedulers, all seeds (must be 0)."""


def scenario_report(name: str, description: str, pairs: Sequence[Pair]) -> ScenarioReport:
    only = sum(len(p.ours.unplaced - p.baseline.unplaced) for p in pairs)
    over = sum(p.baseline.overcommitted + p.ours.overcommitted for p in pairs)
    return ScenarioReport(
        name=name,
        description=description,
        seeds=tuple(p.baseline.seed for p in pairs),
        baseline=side_spreads([p.baseline.metrics for p in pairs]),
        ours=side_spreads([p.ours.metrics for p in pairs]),
        unplaced_only_ours=only,
        overcommitted=over,
    )


@dataclass(frozen=True, slots=True)
class Report:
    plan: Plan
    policy: str
    scenarios: tuple[ScenarioReport, ...]
    verdicts: tuple[Verdict, ...]


def build_report(
    plan: Plan, policy: str, results: Mapping[str, Sequence[Pair]], descriptions: Mapping[str, str]
) -> Report:
    """`descriptions`: scenario -> its text (a scenario's description names its seed's
    draws, e.g. which node turns hot, so the caller picks the first seed's)."""
    scenarios = tuple(
        scenario_report(name, descriptions.get(name, ""), pairs) for name, pairs in results.items()
    )
    return Report(plan, policy, scenarios, tuple(judge(scenarios)))


def describe(results: Mapping[str, Sequence[Pair]], size: Size) -> dict[str, str]:
    """scenario -> the description of its first seed's draw."""
    return {
        name: SCENARIOS[name](pairs[0].baseline.seed, size).description
        for name, pairs in results.items()
        if pairs
    }


def _cell(s: Spread, fmt: Callable[[float], str], seeds: int) -> str:
    return fmt(s.mean) if seeds == 1 else f"{fmt(s.mean)} ± {fmt(s.sd)}"


def _change(base: Spread, ours: Spread) -> str:
    if base.mean == 0:
        return "=" if ours.mean == 0 else "new"
    return f"{100 * (ours.mean - base.mean) / base.mean:+.0f}%"


def _header(report: Report) -> list[str]:
    plan, size, p = report.plan, report.plan.size, report.plan.pipeline
    seeds = plan.seeds
    seed_text = (
        f"seed {seeds[0]}"
        if len(seeds) == 1
        else f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), mean ± sd"
    )
    hosts = (
        "policy's" if plan.max_hosts is None else (str(plan.max_hosts) if plan.max_hosts else "all")
    )
    return [
        f"decice-extender simulate: {size.nodes} nodes, {seed_text}; policy {report.policy}, "
        f"maxHosts {hosts}, extender weight {plan.weight}",
        f"metrics: scrape {p.scrape_interval}s, rate window {p.rate_window}s, rule eval "
        f"{p.rule_interval}s, refresh {p.refresh_interval}s; warm-up {size.warmup / 60:g} min, "
        f"measured {size.duration / 60:g} min; node CPU capped at 100% (demand uncapped)",
    ]


def render(report: Report) -> str:
    """The text table: a block per scenario, then the targets."""
    seeds = len(report.plan.seeds)
    lines = _header(report)
    width = max(len(label) for _, label, _ in ROWS)
    for sc in report.scenarios:
        mean = sc.baseline["pods"].mean
        pods = f"{mean:.0f} pods" + (" a run on average" if mean != int(mean) else "")
        drawn = f"; as drawn for seed {sc.seeds[0]}" if seeds > 1 else ""
        lines += ["", f"{sc.name}: {sc.description} ({pods}{drawn})"]
        cells = [
            (
                label,
                _cell(sc.baseline[k], f, seeds),
                _cell(sc.ours[k], f, seeds),
                _change(sc.baseline[k], sc.ours[k]),
            )
            for k, label, f in ROWS
        ]
        left = max(len(LABELS["baseline"]), *(len(c[1]) for c in cells))
        right = max(len(LABELS["ours"]), *(len(c[2]) for c in cells))
        head = ("", LABELS["baseline"], LABELS["ours"], "change")
        for label, a, b, change in [head, *cells]:
            lines.append(f"  {label:<{width}}  {a:>{left}}  {b:>{right}}  {change:>6}")
    lines += ["", "targets:"]
    for v in report.verdicts:
        mark = {True: "MET   ", False: "MISSED", None: "n/a   "}[v.met]
        lines.append(f"  {mark} {v.target}: {v.detail}")
    lines += ["", "workload (the simulation's claim about a cluster):"]
    lines += [f"  {line}" for line in distribution_text().splitlines()]
    return "\n".join(lines)


def to_json(report: Report) -> dict[str, Any]:
    """The report as a JSON-able document (`--json FILE`)."""
    plan = report.plan
    return {
        "plan": {
            "scenarios": list(plan.scenarios),
            "seeds": list(plan.seeds),
            "size": asdict(plan.size),
            "pipeline": {**asdict(plan.pipeline), "tick": plan.pipeline.tick},
            "maxHosts": plan.max_hosts,
            "extenderWeight": plan.weight,
            "cpuMetric": plan.cpu_metric,
            "policy": report.policy,
        },
        "distribution": distribution_text(),
        "scenarios": {
            sc.name: {
                "description": sc.description,
                "seeds": list(sc.seeds),
                "baseline": {k: asdict(s) for k, s in sc.baseline.items()},
                "ours": {k: asdict(s) for k, s in sc.ours.items()},
                "unplacedOnlyOurs": sc.unplaced_only_ours,
                "overcommitted": sc.overcommitted,
            }
            for sc in report.scenarios
        },
        "targets": [asdict(v) for v in report.verdicts],
    }
