"""`decice-extender simulate`: placement quality, kube-scheduler, ours and the peers.

A seeded simulation (extender.simulation): the same nodes, unseen background load and pods
under kube-scheduler's default scoring from requests, under the same scheduler with our
extender deciding from Prometheus-lagged node CPU through the real engine, and under the
load-aware peers (Trimaran's TargetLoadPacking and LoadVariationRiskBalancing, Koordinator's
LoadAwareScheduling) modelled from their sources. Prints a table per scenario; `--json
FILE` writes the report, `--plot DIR` a PNG per scenario (matplotlib, the optional `plot`
extra).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.simulation.profiles import SCHEDULERS
from extender.simulation.scenarios import SCENARIOS

if TYPE_CHECKING:
    from extender.policy.settings import Settings
    from extender.simulation.experiment import Plan, Runs
    from extender.simulation.stats import Band

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
QUICK = {"nodes": 20, "warmup": 10.0, "duration": 30.0, "burst": 100}
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
"""The cores this process may run on: --jobs' default."""
DEFAULTS = {"nodes": 100, "warmup": 60.0, "duration": 120.0, "burst": 500}


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "simulate",
        help="placement quality: kube-scheduler, with this extender, and the load-aware peers "
        "(seeded simulation)",
    )
    s.add_argument("--config", help=f"policy file (default: the shipped {SHIPPED.name})")
    s.add_argument(
        "--scenario", action="append", choices=list(SCENARIOS), help="repeatable; default all"
    )
    s.add_argument(
        "--scheduler",
        action="append",
        choices=list(SCHEDULERS),
        help="repeatable; default all five",
    )
    s.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    s.add_argument(
        "--seeds", type=int, default=1, help="seeds to run, from --seed on: means and spreads"
    )
    s.add_argument(
        "--quick", action="store_true", help="a small fast run: 20 nodes, 10 + 30 min, burst 100"
    )
    s.add_argument("--nodes", type=int, help="nodes (default 100)")
    s.add_argument("--pods", type=int, help="stream pods per run (default: as many as --load asks)")
    s.add_argument(
        "--load", type=float, default=0.25, help="stream requests / cluster CPU (default 0.25)"
    )
    s.add_argument("--burst", type=int, help="pods of the burst scenario (default 500)")
    s.add_argument("--warmup", type=float, help="minutes before measuring (default 60)")
    s.add_argument("--duration", type=float, help="minutes measured (default 120)")
    s.add_argument(
        "--max-hosts", type=int, help="prioritize.maxHosts, 0 for all (default: the policy's)"
    )
    s.add_argument(
        "--extender-weight",
        type=int,
        default=DEFAULT_WEIGHT,
        help=f"the extender's weight (default {DEFAULT_WEIGHT}, as shipped)",
    )
    s.add_argument(
        "--cpu-metric", default="cpu", help="the policy metric that is node CPU (default cpu)"
    )
    s.add_argument("--scrape-interval", type=int, default=15, help="seconds (default 15)")
    s.add_argument(
        "--rate-window", type=int, default=300, help="seconds, the rule's [5m] (default 300)"
    )
    s.add_argument("--rule-interval", type=int, default=30, help="seconds (default 30)")
    s.add_argument(
        "--fast-window",
        type=int,
        default=60,
        help="seconds of the raw rate our CPU metric also reads, the larger of it and the "
        "rule counting (default 60; 0: the rule alone)",
    )
    s.add_argument(
        "--refresh-interval", type=int, help="seconds (default: the policy's prometheus.interval)"
    )
    s.add_argument(
        "--jobs",
        type=int,
        default=CORES,
        help=f"runs (a scenario and seed each) at once, in processes of their own; the "
        f"results are the same whatever it is (default: the cores there are, {CORES} here)",
    )
    s.add_argument("--json", metavar="FILE", help="write the report as JSON")
    s.add_argument(
        "--plot", metavar="DIR", help="a PNG per scenario of node CPU over time (needs matplotlib)"
    )
    s.set_defaults(func=run)


def _plan(args: argparse.Namespace, settings: Settings) -> Plan:
    from extender.simulation.experiment import Plan, seeds_from
    from extender.simulation.prometheus import Pipeline
    from extender.simulation.scenarios import Size

    base = QUICK if args.quick else DEFAULTS

    def pick(name: str) -> float:
        value = getattr(args, name)
        return base[name] if value is None else value

    size = Size(
        nodes=int(pick("nodes")),
        load=args.load,
        warmup=pick("warmup") * 60,
        duration=pick("duration") * 60,
        burst=int(pick("burst")),
        pods=args.pods,
    )
    pipeline = Pipeline(
        scrape_interval=args.scrape_interval,
        rate_window=args.rate_window,
        rule_interval=args.rule_interval,
        refresh_interval=args.refresh_interval or max(1, round(settings.prometheus.interval)),
        fast_window=args.fast_window,
    )
    # Resolved here so the report names it: 0 is every host (the policy leaves it unset).
    max_hosts = args.max_hosts
    if max_hosts is None:
        max_hosts = settings.prioritize.max_hosts or 0
    return Plan(
        scenarios=tuple(args.scenario or SCENARIOS),
        seeds=tuple(seeds_from(args.seed, max(1, args.seeds))),
        size=size,
        pipeline=pipeline,
        max_hosts=max_hosts,
        weight=args.extender_weight,
        cpu_metric=args.cpu_metric,
        schedulers=tuple(dict.fromkeys(args.scheduler or SCHEDULERS)),
    )


def _run(key: tuple[str, int], job: tuple[Settings, Plan]) -> Runs:
    """One scenario and seed under every scheduler of the plan (a worker's task)."""
    from extender.simulation.experiment import run_scenario

    return run_scenario(job[0], job[1], *key)


def run_plan_on(settings: Settings, plan: Plan, jobs: int) -> dict[str, list[Runs]]:
    """extender.simulation.experiment.run_plan on `jobs` processes (replay's pool,
    extender.replay.runs.fork_map), with a count and an ETA on stderr: the same results
    whatever `jobs` is, since every run is seeded and shares nothing."""
    from extender.cli.progress import counter
    from extender.replay.runs import fork_map

    keys = [(name, seed) for name in plan.scenarios for seed in plan.seeds]
    bar = counter(len(keys), "simulating", "run")

    def finished(key: tuple[str, int], _: Runs) -> None:
        bar.set_postfix_str(f"{key[0]} seed {key[1]} done", refresh=False)
        bar.update(1)

    try:
        runs = fork_map(_run, (settings, plan), keys, jobs, finished)
    finally:
        bar.close()
    return {name: [runs[name, seed] for seed in plan.seeds] for name in plan.scenarios}


def run(args: argparse.Namespace) -> int:
    from extender.cli.common import load
    from extender.simulation.report import build_report, describe, render, to_json

    if args.config is None and not SHIPPED.is_file():
        print(
            "decice-extender simulate: the shipped config/extender.yaml is not beside this "
            "installation; pass --config POLICY",
            file=sys.stderr,
        )
        return 2
    path = args.config or str(SHIPPED)
    settings = load(path)
    if args.jobs < 1:
        print("decice-extender simulate: --jobs must be at least 1", file=sys.stderr)
        return 2
    try:
        plan = _plan(args, settings)
    except ValueError as exc:
        print(f"decice-extender simulate: {exc}", file=sys.stderr)
        return 2
    pyplot = pyplot_or_say_why() if args.plot else None
    if args.plot and pyplot is None:
        return 1  # before minutes of simulation, not after
    metrics = [m.name for m in settings.fetched_metrics]
    if plan.cpu_metric not in metrics:
        print(
            f"warning: the policy has no metric {plan.cpu_metric!r} (it has {', '.join(metrics)}): "
            "ours will see no node CPU; see --cpu-metric",
            file=sys.stderr,
        )
    others = [m for m in metrics if m != plan.cpu_metric]
    if others:
        print(
            f"note: metrics {', '.join(others)} are not simulated: no node has a value, so each "
            "metric's onMissing decides",
            file=sys.stderr,
        )
    started = time.perf_counter()
    jobs = min(args.jobs, len(plan.scenarios) * len(plan.seeds))
    results = run_plan_on(settings, plan, jobs)
    report = build_report(plan, path, results, describe(results, plan.size))
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    if pyplot is not None:
        plot(results, Path(args.plot), plan.size.warmup, pyplot)
    print(f"ran in {time.perf_counter() - started:.1f} s ({jobs} jobs)", file=sys.stderr)
    return 0


def pyplot_or_say_why(
    importer: Callable[[str], ModuleType] = importlib.import_module,
) -> ModuleType | None:
    """matplotlib.pyplot (non-interactive), or None after saying how to get it.

    matplotlib is optional (the `plot` extra) and imported by name, only here, through
    `importer` (a test passes one that fails)."""
    try:
        importer("matplotlib").use("Agg")
        return importer("matplotlib.pyplot")
    except ImportError:
        print(
            "decice-extender simulate: --plot needs matplotlib, an optional extra: "
            "pip install 'decice-extender[plot]' (or pip install matplotlib)",
            file=sys.stderr,
        )
        return None


def plot(results: dict[str, list[Runs]], where: Path, warmup: float, plt: Any) -> None:
    """A PNG per scenario (its first seed): node CPU across nodes (p50-p95 band, p50, max,
    max uncapped demand), a panel per scheduler, side by side."""
    where.mkdir(parents=True, exist_ok=True)
    for name, all_runs in results.items():
        runs = all_runs[0]
        shown = [runs[s] for s in runs]
        fig, axes = plt.subplots(
            1, len(shown), figsize=(4.2 * len(shown), 4), sharey=True, squeeze=False
        )
        for ax, result in zip(axes[0], shown, strict=True):
            _draw(ax, result.bands, warmup, result.scheduler)
        top = max((b.demand_max for r in shown for b in r.bands), default=1)
        first = axes[0][0]
        first.set_ylim(0, max(105.0, 100 * top + 5))  # shared by all
        first.set_ylabel("node CPU %")
        first.legend(loc="lower center", ncol=2, fontsize="x-small")
        fig.suptitle(f"{name} (seed {runs.seed}): node CPU across nodes")
        fig.tight_layout()
        out = where / f"{name}.png"
        fig.savefig(out, dpi=100)
        plt.close(fig)
        print(f"wrote {out}", file=sys.stderr)


def _draw(ax: Any, bands: Sequence[Band], warmup: float, title: str) -> None:
    minutes = [(b.t - warmup) / 60 for b in bands]
    p50 = [100 * b.p50 for b in bands]
    ax.fill_between(
        minutes, p50, [100 * b.p95 for b in bands], alpha=0.4, label="p50-p95 across nodes"
    )
    ax.plot(minutes, p50, linewidth=0.8, label="p50")
    ax.plot(minutes, [100 * b.max for b in bands], linewidth=0.8, label="max")
    demand = [100 * b.demand_max for b in bands]
    ax.plot(minutes, demand, linewidth=0.6, linestyle=":", label="max demand (uncapped)")
    ax.axhline(90, color="red", linestyle="--", linewidth=0.8, label="90%")
    if minutes and minutes[0] < 0:
        ax.axvspan(minutes[0], 0, color="grey", alpha=0.15, label="warm-up")
    ax.set_xlabel("minutes (0: measuring starts)")
    ax.set_title(title)
