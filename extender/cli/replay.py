"""`decice-extender replay`: what we, and kube-scheduler alone, would have done on the
user's own Prometheus history (extender.replay), printed as the simulation's table with
the real placements first. Bad input: one message, exit code 1 (2 for bad arguments).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.cli.simulate import (
    add_shared,
    emit,
    fail,
    panels,
    pipeline_of,
    policy,
    pyplot_or_say_why,
    saved,
)
from extender.policy import windows
from extender.simulation.profiles import SCHEDULERS

if TYPE_CHECKING:
    from extender.policy.settings import Settings
    from extender.replay.report import ReplayReport
    from extender.simulation.prometheus import Pipeline

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B?)?", re.IGNORECASE)


def duration(text: str) -> float:
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
    with contextlib.suppress(ValueError):
        return float(text)
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
    add_shared(
        s,
        "the models to replay (repeatable; default all; kube-scheduler's always runs: "
        "it is checked against what happened)",
        30,
        "seconds between scrapes (30, kube-prometheus-stack's); also what one "
        "kube_pod_info sample spans, for when a pod no scrape saw deleted ended",
    )
    s.add_argument("--prometheus", metavar="URL", help="the server (default: the policy's)")
    s.add_argument("--from", dest="start", required=True, type=moment, metavar="TIME")
    s.add_argument("--to", dest="end", required=True, type=moment, metavar="TIME")
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
    s.add_argument(
        "--max-memory", type=size, default=4 * 2**30, help="refuse a range needing more (4GiB)"
    )
    s.add_argument("--timeout", type=duration, default=60.0, help="per range query (60s)")
    s.add_argument("--lead-in", type=duration, default=600.0, help="warm-up before --from (10m)")
    s.add_argument("--seed", type=int, default=1, help="kube-scheduler's tie-breaks (1)")
    s.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at once (2)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extender.replay.problems import ReplayProblem

    if args.end <= args.start:
        return fail("replay", "--from must be before --to")
    if args.step < 1 or args.step != int(args.step):
        return fail("replay", "--step must be a whole number of seconds, at least 1s")
    bad = [n for n in args.namespace if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", n)]
    if bad:
        return fail("replay", f"not a namespace name: {', '.join(bad)}")
    found = policy("replay", args)
    if found is None:
        return 2
    path, settings = found
    metric = next((m for m in settings.fetched_metrics if m.name == args.cpu_metric), None)
    if metric is None:
        names = ", ".join(m.name for m in settings.fetched_metrics)
        return fail(
            "replay", f"the policy has no metric {args.cpu_metric!r} ({names}): see --cpu-metric"
        )
    if settings.provider != "prometheus" and args.prometheus is None:
        return fail("replay", "the policy's provider is static: pass --prometheus URL")
    try:
        pipeline = pipeline_of(args, settings)
    except ValueError as exc:
        return fail("replay", str(exc))
    pyplot = pyplot_or_say_why("replay") if args.plot else None
    if args.plot and pyplot is None:
        return 1
    try:
        report = _replay(args, settings, path, metric.query, pipeline)
    except ReplayProblem as exc:
        return fail("replay", str(exc), 1)
    from extender.replay.report import render, to_json

    emit(args, render(report), to_json(report), lambda where: plot(report, where, pyplot))
    return 0


def _replay(
    args: argparse.Namespace, settings: Settings, path: str, query: str, pipeline: Pipeline
) -> ReplayReport:
    from tqdm import tqdm

    from extender.doctor.prometheus import auth_text
    from extender.errors.causes import describe
    from extender.metrics.history import HistoryReader
    from extender.replay.collect import Ask, collect
    from extender.replay.driver import Work, run_all
    from extender.replay.models import KUBE_SCHEDULER, REAL, Options
    from extender.replay.problems import unreachable
    from extender.replay.reconstruct import DEFAULT_SCHEDULER, Selection, reconstruct
    from extender.replay.report import ReplayReport, Setup, fidelity

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
    bars: dict[str, tqdm[Any]] = {}

    def bar(stage: str, done: float) -> None:
        """A bar per stage on stderr, 0..100 % with its ETA (tqdm), closed at 100 %."""
        if stage not in bars:
            bars[stage] = tqdm(total=100, desc=stage, unit="%", file=sys.stderr, dynamic_ncols=True)
        pct = int(100 * min(1.0, max(0.0, done)))
        if pct > bars[stage].n:
            bars[stage].update(pct - bars[stage].n)
        if pct == 100:
            bars[stage].close()

    began = time.perf_counter()
    try:
        reader = HistoryReader(prometheus)
    except Exception as exc:  # a password file that cannot be read, a bad CA path
        raise unreachable(prometheus.url, describe(exc)) from exc
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
        options=options,
    )
    check = fidelity(runs[REAL], runs[KUBE_SCHEDULER], history)
    return ReplayReport(setup, history, runs, check, (*notes, *history.notes))


def plot(report: ReplayReport, where: Path, plt: Any) -> None:
    """replay.png: node CPU across nodes over time, a panel per row."""
    start = report.history.grid.measured_from * report.history.grid.step
    saved(plt, panels(plt, report.runs, 5, start, 3600, "hours from --from"), where / "replay.png")
