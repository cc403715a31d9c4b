"""`decice-extender replay`: what we, and kube-scheduler alone, would have done on the
user's own Prometheus history.

Reads the range from the server the policy names (or --prometheus, with the policy's
auth, tenant and TLS settings), reconstructs arrivals, requests, each pod's use and each
node's background (extender.replay), replays every pod that arrived in the range under
each scheduler model, and prints the simulation's table with the real placements as the
first column. `--json FILE` writes `simulate --json`'s shape, `--plot DIR` a PNG of node
CPU over time per row. Every bad input ends in one message and exit code 1 (2 for bad
arguments), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.cli.simulate import SHIPPED
from extender.policy import windows
from extender.policy.scheduler_config import DEFAULT_WEIGHT
from extender.simulation.profiles import SCHEDULERS

if TYPE_CHECKING:
    from extender.policy.settings import Settings
    from extender.replay.report import ReplayReport
    from extender.simulation.prometheus import Pipeline

COMMAND = "decice-extender replay"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B?)?", re.IGNORECASE)


def duration(text: str) -> float:
    """ "30s", "1m30s", "7d" or plain seconds."""
    try:
        return float(text)
    except ValueError:
        seconds = windows.duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 30s, 5m, 7d)")
    return seconds


def moment(text: str, now: Callable[[], float] = time.time) -> float:
    """A time: RFC 3339 / ISO 8601 (no zone: UTC), unix seconds, `now` or `now-7d`."""
    if text == "now" or text.startswith("now-"):
        return now() - (duration(text[4:]) if text != "now" else 0.0)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time (e.g. 2026-11-18T00:00Z, unix seconds, now-7d)"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def size(text: str) -> float:
    """Bytes: 4GiB, 512MiB, 2G, or a plain number of bytes."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4GiB, 512MiB)")
    unit = (match.group(2) or "").upper()[:1]
    return float(match.group(1)) * float(1024 ** " KMGT".index(unit or " "))


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "replay",
        help="what we, and kube-scheduler alone, would have done on your Prometheus history",
    )
    s.add_argument("--prometheus", metavar="URL", help="the server (default: the policy's)")
    s.add_argument("--from", dest="start", required=True, type=moment, metavar="TIME")
    s.add_argument("--to", dest="end", required=True, type=moment, metavar="TIME")
    s.add_argument("--config", help=f"policy file (default: the shipped {SHIPPED.name})")
    s.add_argument(
        "--namespace", action="append", default=[], help="replay only these (repeatable)"
    )
    s.add_argument(
        "--scheduler-name",
        action="append",
        default=[],
        help="replay pods of these schedulers (repeatable; default default-scheduler)",
    )
    s.add_argument("--step", type=duration, default=30.0, help="resolution (default 30s)")
    s.add_argument("--json", metavar="FILE", help="write the report as JSON")
    s.add_argument("--plot", metavar="DIR", help="a PNG of node CPU over time (needs matplotlib)")
    s.add_argument(
        "--max-memory", type=size, default=4 * 2**30, help="refuse a range needing more (4GiB)"
    )
    s.add_argument("--timeout", type=duration, default=60.0, help="per range query (60s)")
    s.add_argument("--lead-in", type=duration, default=600.0, help="warm-up before --from (10m)")
    s.add_argument("--cpu-metric", default="cpu", help="the policy metric that is node CPU")
    s.add_argument("--max-hosts", type=int, help="prioritize.maxHosts, 0 for all")
    s.add_argument(
        "--extender-weight",
        type=int,
        default=DEFAULT_WEIGHT,
        help=f"the extender's weight (default {DEFAULT_WEIGHT}, as shipped)",
    )
    s.add_argument(
        "--scheduler",
        action="append",
        choices=SCHEDULERS,
        help="the models to replay (repeatable; default all; kube-scheduler's always runs: "
        "it is checked against what happened)",
    )
    s.add_argument("--seed", type=int, default=1, help="kube-scheduler's tie-breaks (1)")
    s.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at once (2)")
    s.add_argument(
        "--scrape-interval",
        type=int,
        default=30,
        help="seconds between scrapes (30, kube-prometheus-stack's); also what one "
        "kube_pod_info sample spans, for when a pod no scrape saw deleted ended",
    )
    s.add_argument("--rate-window", type=int, default=300, help="seconds, the rule's [5m]")
    s.add_argument("--rule-interval", type=int, default=30, help="seconds (30)")
    s.add_argument(
        "--fast-window",
        type=int,
        default=60,
        help="seconds of the raw rate our CPU metric also reads (60; 0: the rule alone)",
    )
    s.add_argument("--refresh-interval", type=int, help="seconds (the policy's interval)")
    s.set_defaults(func=run)


def _fail(message: str, code: int) -> int:
    print(f"{COMMAND}: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    from extender.cli.common import load

    if args.end <= args.start:
        return _fail("--from must be before --to", 2)
    if args.step < 1 or args.step != int(args.step):
        return _fail("--step must be a whole number of seconds, at least 1s", 2)
    bad = [n for n in args.namespace if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n)]
    if bad:
        return _fail(f"not a namespace name: {', '.join(bad)}", 2)
    if args.config is None and not SHIPPED.is_file():
        return _fail("the shipped config/extender.yaml is not here; pass --config POLICY", 2)
    path = args.config or str(SHIPPED)
    settings = load(path)
    metric = next((m for m in settings.fetched_metrics if m.name == args.cpu_metric), None)
    if metric is None:
        names = ", ".join(m.name for m in settings.fetched_metrics)
        return _fail(f"the policy has no metric {args.cpu_metric!r} ({names}): see --cpu-metric", 2)
    if settings.provider != "prometheus" and args.prometheus is None:
        return _fail("the policy's provider is static: pass --prometheus URL", 2)
    try:
        pipeline = _pipeline(args, settings)
    except ValueError as exc:
        return _fail(str(exc), 2)
    pyplot = _pyplot() if args.plot else None
    if args.plot and pyplot is None:
        return _fail(
            "--plot needs matplotlib, an optional extra: pip install 'decice-extender[plot]'", 1
        )
    try:
        report = _replay(args, settings, path, metric.query, pipeline)
    except Exception as exc:
        from extender.replay.problems import ReplayProblem

        if isinstance(exc, ReplayProblem):
            return _fail(str(exc), 1)
        raise
    from extender.replay.report import render, to_json

    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
    if pyplot is not None:
        plot(report, Path(args.plot), pyplot)
    return 0


def _pyplot() -> Any:
    """matplotlib.pyplot, non-interactive, or None when matplotlib is not installed."""
    try:
        importlib.import_module("matplotlib").use("Agg")
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return None


def _pipeline(args: argparse.Namespace, settings: Settings) -> Pipeline:
    from extender.simulation.prometheus import Pipeline

    return Pipeline(
        scrape_interval=args.scrape_interval,
        rate_window=args.rate_window,
        rule_interval=args.rule_interval,
        fast_window=args.fast_window,
        refresh_interval=args.refresh_interval or max(1, round(settings.prometheus.interval)),
    )


def _replay(
    args: argparse.Namespace, settings: Settings, path: str, query: str, pipeline: Pipeline
) -> ReplayReport:
    from extender.doctor.prometheus import auth_text
    from extender.metrics.history import HistoryReader
    from extender.replay.collect import Ask, collect
    from extender.replay.fidelity import fidelity
    from extender.replay.models import KUBE_SCHEDULER, REAL, Options
    from extender.replay.reconstruct import DEFAULT_SCHEDULER, Selection, reconstruct
    from extender.replay.report import ReplayReport, Setup
    from extender.replay.runs import Work, run_all

    prometheus = settings.prometheus.model_copy(
        update={
            "timeout": args.timeout,
            **({"url": args.prometheus.rstrip("/")} if args.prometheus else {}),
        }
    )
    schedulers = tuple(args.scheduler_name or [DEFAULT_SCHEDULER])
    selection = Selection(frozenset(args.namespace), frozenset(schedulers))
    ask = Ask(
        start=args.start,
        end=args.end,
        step=args.step,
        cpu_query=query,
        node_label=prometheus.node_label,
        selection=selection,
        lead=args.lead_in,
        scrape=args.scrape_interval,
        max_memory=args.max_memory,
        jobs=args.jobs,
    )
    from extender.cli.progress import Bar

    bar = Bar()
    began = time.perf_counter()
    try:
        reader = HistoryReader(prometheus)
    except Exception as exc:  # a password file that cannot be read, a bad CA path
        from extender.errors.causes import describe
        from extender.replay.problems import Unreachable

        raise Unreachable(f"cannot query {prometheus.url}: {describe(exc)}") from exc
    collected = collect(
        reader, ask, time.time(), bar, url=prometheus.url, auth=auth_text(prometheus), policy=path
    )
    fetched = time.perf_counter()
    history = reconstruct(collected.facts, selection)
    notes, estimate = collected.notes, collected.size.bytes
    del collected
    options = Options(
        args.seed, args.max_hosts, args.extender_weight, args.cpu_metric, pipeline.refresh_interval
    )
    work = Work(history, settings, options, pipeline)
    models = {KUBE_SCHEDULER, *(args.scheduler or SCHEDULERS)}
    spent: dict[str, float] = {}
    runs = run_all(work, args.jobs, lambda done: bar("replaying", done), tuple(models), spent)
    ran = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        f"fetched in {fetched - began:.1f} s, replayed in {ran - fetched:.1f} s "
        f"({args.jobs} jobs); peak memory {peak / 2**20:.0f} MiB (estimated "
        f"{estimate / 2**20:.0f} MiB)"
        + (f", {workers / 2**20:.0f} MiB in the largest worker" if args.jobs > 1 else "")
        + "; cpu seconds per row: "
        + ", ".join(f"{name} {seconds:.1f}" for name, seconds in spent.items()),
        file=sys.stderr,
    )
    setup = Setup(
        url=prometheus.url,
        policy=path,
        start=args.start,
        end=args.end,
        step=args.step,
        lead=history.grid.measured_from * history.grid.step,
        pipeline=pipeline,
        namespaces=tuple(sorted(args.namespace)),
        schedulers=schedulers,
        max_hosts=args.max_hosts,
        weight=args.extender_weight,
        cpu_metric=args.cpu_metric,
        seed=args.seed,
    )
    check = fidelity(runs[REAL], runs[KUBE_SCHEDULER], history)
    return ReplayReport(setup, history, runs, check, (*notes, *history.notes))


def plot(report: ReplayReport, where: Path, plt: Any) -> None:
    """replay.png: node CPU across nodes over time (p50-p95 band, max), a panel per row."""
    where.mkdir(parents=True, exist_ok=True)
    runs = report.runs
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 4), sharey=True)
    start = report.history.grid.measured_from * report.history.grid.step
    for ax, (name, run) in zip(axes, runs.items(), strict=True):
        hours = [(b.t - start) / 3600 for b in run.bands]
        p50 = [100 * b.p50 for b in run.bands]
        ax.fill_between(hours, p50, [100 * b.p95 for b in run.bands], alpha=0.4, label="p50-p95")
        ax.plot(hours, [100 * b.max for b in run.bands], linewidth=0.6, label="max")
        ax.axhline(90, color="red", linestyle="--", linewidth=0.8, label="90%")
        ax.set_title(name)
        ax.set_xlabel("hours from --from")
    axes[0].set_ylabel("node CPU %")
    axes[0].legend(loc="lower center", ncol=3, fontsize="x-small")
    fig.tight_layout()
    out = where / "replay.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"wrote {out}", file=sys.stderr)
