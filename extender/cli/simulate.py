"""`decice-extender simulate`: placement quality, kube-scheduler, ours and the peers, in a
seeded simulation (extender.simulation). A table per scenario; `--json FILE` the report,
`--plot DIR` a PNG per scenario (matplotlib, the optional `plot` extra).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.simulation.profiles import SCHEDULERS
from extender.simulation.scenarios import SCENARIOS

if TYPE_CHECKING:
    from extender.policy.settings import Settings
    from extender.simulation.experiment import Plan, Runs
    from extender.simulation.prometheus import Pipeline

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "extender.yaml"
QUICK = {"nodes": 20, "warmup": 10.0, "duration": 30.0, "burst": 100}
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
DEFAULTS = {"nodes": 100, "warmup": 60.0, "duration": 120.0, "burst": 500}


def add_shared(
    s: argparse.ArgumentParser, scheduler_help: str, scrape: int, scrape_help: str
) -> None:
    s.add_argument("--config", help=f"policy file (default: the shipped {SHIPPED.name})")
    s.add_argument("--scheduler", action="append", choices=SCHEDULERS, help=scheduler_help)
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
    s.add_argument("--scrape-interval", type=int, default=scrape, help=scrape_help)
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
    s.add_argument("--json", metavar="FILE", help="write the report as JSON")
    s.add_argument("--plot", metavar="DIR", help="a PNG of node CPU over time (needs matplotlib)")


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "simulate",
        help="placement quality: kube-scheduler, with this extender, and the load-aware peers "
        "(seeded simulation)",
    )
    add_shared(s, "repeatable; default all five", 15, "seconds (default 15)")
    s.add_argument(
        "--scenario", action="append", choices=list(SCENARIOS), help="repeatable; default all"
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
        "--jobs",
        type=int,
        default=CORES,
        help=f"runs (a scenario and seed each) at once, in processes of their own; the "
        f"results are the same whatever it is (default: the cores there are, {CORES} here)",
    )
    s.set_defaults(func=run)


def fail(command: str, message: str, code: int = 2) -> int:
    print(f"decice-extender {command}: {message}", file=sys.stderr)
    return code


def policy(command: str, args: argparse.Namespace) -> tuple[str, Settings] | None:
    """The policy's path and settings, or None after saying the shipped one is not here."""
    from extender.policy.loading import load_settings

    if args.config is None and not SHIPPED.is_file():
        fail(command, "the shipped config/extender.yaml is not here; pass --config POLICY")
        return None
    path = args.config or str(SHIPPED)
    return path, load_settings(path, os.environ)


def emit(args: argparse.Namespace, text: str, document: Any, drawn: Callable[[Path], None]) -> None:
    """The report printed, written as JSON (--json) and drawn (--plot)."""
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        drawn(Path(args.plot))


def pipeline_of(args: argparse.Namespace, settings: Settings) -> Pipeline:
    from extender.simulation.prometheus import Pipeline

    return Pipeline(
        scrape_interval=args.scrape_interval,
        rate_window=args.rate_window,
        rule_interval=args.rule_interval,
        refresh_interval=args.refresh_interval or max(1, round(settings.prometheus.interval)),
        fast_window=args.fast_window,
    )


def _plan(args: argparse.Namespace, settings: Settings) -> Plan:
    from extender.simulation.experiment import Plan
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
    # Resolved here so the report names it: 0 is every host (the policy leaves it unset).
    max_hosts = settings.prioritize.max_hosts or 0 if args.max_hosts is None else args.max_hosts
    return Plan(
        scenarios=tuple(args.scenario or SCENARIOS),
        seeds=tuple(range(args.seed, args.seed + max(1, args.seeds))),
        size=size,
        pipeline=pipeline_of(args, settings),
        max_hosts=max_hosts,
        weight=args.extender_weight,
        cpu_metric=args.cpu_metric,
        schedulers=tuple(dict.fromkeys(args.scheduler or SCHEDULERS)),
    )


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from extender.simulation.experiment import run_plan
    from extender.simulation.report import build_report, describe, render, to_json

    found = policy("simulate", args)
    if found is None:
        return 2
    path, settings = found
    if args.jobs < 1:
        return fail("simulate", "--jobs must be at least 1")
    try:
        plan = _plan(args, settings)
    except ValueError as exc:
        return fail("simulate", str(exc))
    pyplot = pyplot_or_say_why("simulate") if args.plot else None
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
    runs = len(plan.scenarios) * len(plan.seeds)
    jobs = min(args.jobs, runs)
    bar = tqdm(total=runs, desc="simulating", unit="run", file=sys.stderr, dynamic_ncols=True)

    def finished(key: tuple[str, int], _: Runs) -> None:
        bar.set_postfix_str(f"{key[0]} seed {key[1]} done", refresh=False)
        bar.update(1)

    try:
        results = run_plan(settings, plan, jobs, finished)
    finally:
        bar.close()
    report = build_report(plan, path, results, describe(results, plan.size))
    emit(
        args, render(report), to_json(report), lambda d: plot(results, d, plan.size.warmup, pyplot)
    )
    print(f"ran in {time.perf_counter() - started:.1f} s ({jobs} jobs)", file=sys.stderr)
    return 0


def pyplot_or_say_why(
    command: str, importer: Callable[[str], ModuleType] = importlib.import_module
) -> ModuleType | None:
    """matplotlib.pyplot (non-interactive), or None after saying how to get it."""
    try:
        importer("matplotlib").use("Agg")
        return importer("matplotlib.pyplot")
    except ImportError:
        fail(
            command,
            "--plot needs matplotlib, an optional extra: pip install 'decice-extender[plot]'",
        )
        return None


def panels(
    plt: Any, runs: Mapping[str, Any], width: float, start: float, per: float, xlabel: str
) -> Any:
    """A panel per run: node CPU across nodes over time, `per` seconds a unit from `start`."""
    fig, axes = plt.subplots(
        1, len(runs), figsize=(width * len(runs), 4), sharey=True, squeeze=False
    )
    for ax, (title, run) in zip(axes[0], runs.items(), strict=True):
        at = [(b.t - start) / per for b in run.bands]
        p50 = [100 * b.p50 for b in run.bands]
        p95 = [100 * b.p95 for b in run.bands]
        ax.fill_between(at, p50, p95, alpha=0.4, label="p50-p95 across nodes")
        ax.plot(at, p50, linewidth=0.8, label="p50")
        ax.plot(at, [100 * b.max for b in run.bands], linewidth=0.8, label="max")
        demand = [100 * b.demand_max for b in run.bands]
        ax.plot(at, demand, linewidth=0.6, linestyle=":", label="max demand (uncapped)")
        ax.axhline(90, color="red", linestyle="--", linewidth=0.8, label="90%")
        if at and at[0] < 0:
            ax.axvspan(at[0], 0, color="grey", alpha=0.15, label="warm-up")
        ax.set_xlabel(xlabel)
        ax.set_title(title)
    top = max((b.demand_max for r in runs.values() for b in r.bands), default=1)
    axes[0][0].set_ylim(0, max(105.0, 100 * top + 5))
    axes[0][0].set_ylabel("node CPU %")
    axes[0][0].legend(loc="lower center", ncol=2, fontsize="x-small")
    return fig


def saved(plt: Any, fig: Any, out: Path) -> None:
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"wrote {out}", file=sys.stderr)


def plot(results: dict[str, list[Runs]], where: Path, warmup: float, plt: Any) -> None:
    """A PNG per scenario (its first seed), a panel per scheduler."""
    for name, all_runs in results.items():
        runs = all_runs[0]
        fig = panels(plt, runs.results, 4.2, warmup, 60, "minutes (0: measuring starts)")
        fig.suptitle(f"{name} (seed {runs.seed}): node CPU across nodes")
        saved(plt, fig, where / f"{name}.png")
