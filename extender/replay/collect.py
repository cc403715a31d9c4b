"""What a replay asks the server, in order: a probe; the range's presence; the window
queries (folded into Facts), every missing series then named at once; the memory estimate
(Size), refused above the limit; the fine queries, chunked. Failures: a ReplayProblem.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from extender.decisions.model import NodeInventory
from extender.errors.causes import HTTPStatusError, describe
from extender.metrics.providers import node_of
from extender.replay import problems, queries
from extender.replay.facts import Facts, samples
from extender.replay.model import Grid
from extender.replay.problems import ReplayProblem, TooLarge, gib, too_large
from extender.replay.reconstruct import Selection, pod_times


class Answer(Protocol):
    @property
    def result(self) -> list[Any]: ...

    @property
    def done(self) -> float: ...


class Source(Protocol):
    def query_range(
        self, promql: str, start: float, end: float, step: float, series: int = 1
    ) -> Iterable[Answer]: ...

    def probe(self) -> None: ...

    def retention(self) -> str | None: ...


Progress = Callable[[str, float], None]

# How much memory a replay takes, known after the window queries; the figures per item are
# what the arrays hold plus a margin (tests/benchmarks/test_replay_quick.py holds them up).
NODE_STEP = 4 + 8  # its CPU trace and its background
RUN_NODE_STEP = 80  # per node and step, each run at once (measured: tests/benchmarks/replay.py)
POD_STEP = 4 + 4  # the fetched trace and its filled copy
STEP = 400
POD = 3000
SAMPLE = 200
BASE = 200 * 2**20
STEPS = (60, 120, 300)
"""Steps suggested when too large: none coarser than the stock rules' 5-minute window."""


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    steps: int
    pods: int
    pod_steps: int
    answer_samples: int
    step: float
    runs: int = 1

    @property
    def scaled(self) -> float:
        """Bytes that shrink in proportion as the step grows."""
        node_steps = self.nodes * self.steps
        held = node_steps * NODE_STEP + self.pod_steps * POD_STEP + self.steps * STEP
        return held + self.runs * node_steps * RUN_NODE_STEP

    @property
    def fixed(self) -> float:
        return BASE + self.pods * POD + self.answer_samples * SAMPLE

    @property
    def bytes(self) -> float:
        return self.scaled + self.fixed

    def detail(self) -> str:
        days = self.steps * self.step / 86400
        return (
            f"{self.nodes} nodes and {self.pods} pods over {days:.1f} days at step "
            f"{self.step:g}s: {self.nodes * self.steps:,} node-steps, {self.pod_steps:,} "
            "steps of replayed pods' use"
        )


def check(size: Size, limit: float) -> TooLarge | None:
    if size.bytes <= limit:
        return None
    room = limit - size.fixed
    fitting = [s for s in STEPS if s > size.step and size.scaled * size.step / s <= room]
    if fitting and room > 0:
        step = fitting[0]
        at = size.fixed + size.scaled * size.step / step
        suggestion = f"use --step {step:g}s (about {gib(at)}) or a shorter range"
    elif room > 0:
        days = size.steps * size.step / 86400 * room / size.scaled
        suggestion = f"use a range of at most {days:.1f} days, or raise --max-memory"
    else:
        suggestion = "replay fewer namespaces (--namespace) or raise --max-memory"
    return too_large(size.bytes, limit, size.detail(), suggestion)


@dataclass(frozen=True, slots=True)
class Ask:
    start: float
    end: float
    step: float
    cpu_query: str
    node_label: str = "node"
    selection: Selection = field(default_factory=Selection)
    lead: float = 600.0  # seconds before --from replayed as they happened, so the pipeline is warm
    scrape: float = 30.0
    max_memory: float = 4 * 2**30
    max_samples: int = 500_000
    jobs: int = 1

    @property
    def grid(self) -> Grid:
        lead = math.ceil(self.lead / self.step)
        steps = lead + max(1, math.ceil((self.end - self.start) / self.step - 1e-9))
        return Grid(self.start - lead * self.step, self.step, steps, lead)

    @property
    def window(self) -> float:
        """The window queries' window: about a 24th of the range, at most an hour, whole steps."""
        span = self.grid.steps * self.step
        steps = max(1, min(round(3600 / self.step), math.ceil(span / 24 / self.step)))
        return steps * self.step


class Collector:
    def __init__(self, source: Source, ask: Ask, url: str, auth: str, policy: str) -> None:
        self.source = source
        self.ask = ask
        self.url = url
        self.auth = auth
        self.policy = policy
        self.grid = ask.grid
        self.facts = Facts(self.grid, ask.window, ask.scrape)
        self.notes: list[str] = []
        self.size: Size | None = None

    @contextmanager
    def asking(self) -> Iterator[None]:
        """The server's failures as a ReplayProblem naming the cause."""
        try:
            yield
        except ReplayProblem:
            raise
        except Exception as exc:
            if isinstance(exc, HTTPStatusError) and exc.status in (401, 403):
                raise problems.refused(self.url, exc.status, self.auth, self.policy) from exc
            raise problems.unreachable(self.url, describe(exc)) from exc

    def range(
        self, promql: str, start: float, end: float, step: float, series: int = 1
    ) -> Iterator[Answer]:
        with self.asking():
            yield from self.source.query_range(promql, start, end, step, series)

    def counts(self, promql: str) -> list[tuple[float, float]]:
        """`promql` (a count) every window over the grid: (time, value)."""
        window, grid = self.ask.window, self.grid
        out: list[tuple[float, float]] = []
        for answer in self.range(promql, grid.start + window, _ceil(grid, window), window):
            for series in answer.result:
                out += samples(series)
        return sorted(out)

    # --- the steps
    def covered(self, now: float) -> None:
        # The stated retention first: a server deletes what it no longer keeps at its next
        # compaction, so data still there past it may vanish in the middle of the replay.
        retention = None
        with suppress(Exception):
            retention = self.source.retention()
        start = self.ask.start
        problem = problems.beyond_retention(start, retention, now)
        if problem is not None:
            raise problem
        held = self.counts('count(kube_node_status_allocatable{resource="cpu"})')
        first = held[0][0] - self.ask.window if held else None
        if first is not None and first <= start + self.ask.window:
            return
        if first is None:
            if not self.counts("count(up)"):
                raise problems.no_data(start, self.ask.end, self.url)
            return  # data but no nodes: the missing check names the series
        self.notes.append(f"no node data before {problems.when(first)}: replayed from there")

    def windows(self, progress: Progress) -> None:
        ask, grid, facts = self.ask, self.grid, self.facts
        node_ips = ask.node_label == "instance"
        inputs = queries.window_inputs(f"{ask.window:g}s", node_ips)
        pods = max((v for _, v in self.counts("count(kube_pod_info)")), default=1.0)
        for i, item in enumerate(inputs):
            if item.key in ("allocatable", "taints", "node_info"):
                hint = max(1, len(facts.nodes))
            else:
                hint = int(2 * pods)  # churn: more pods pass through a window than at once
            for answer in self.range(
                item.promql, grid.start + ask.window, _ceil(grid, ask.window), ask.window, hint
            ):
                facts.fold(item.key, answer.result)
                progress("pods and nodes", (i + answer.done) / len(inputs))

    def check_present(self) -> None:
        ask, facts = self.ask, self.facts
        inputs = queries.window_inputs("1m", ask.node_label == "instance")
        series = {item.key: item.series for item in inputs}
        lacking = [(series[key], label, every) for key, label, every in facts.keys.lacking()]
        named = {name for name, _, _ in lacking}
        missing = [
            (item.series, queries.PURPOSES.get(item.key, item.key))
            for item in inputs
            if item.required and item.key not in facts.seen and item.series not in named
        ]
        usage = queries.USAGE_RULE + queries.matcher(ask.selection.namespaces)
        if not self.counts(f"count({usage})"):
            missing.append((queries.USAGE_RULE, "each pod's measured CPU"))
        if not self.counts(f"count({ask.cpu_query})"):
            names = queries.selectors_in(ask.cpu_query)
            absent = [n for n in names if not self.counts(f"count({n})")]
            if not absent:
                raise problems.MissingSeries(
                    "the policy's cpu query answers nothing over the range though every "
                    f"series it reads ({', '.join(names)}) has data: check its label "
                    f"matchers and joins, and prometheus.nodeLabel ({ask.node_label})"
                )
            missing += [(n, "node CPU, read by the policy's cpu query") for n in absent]
        if missing or lacking:
            raise problems.missing(missing, ask.start, ask.end, lacking)

    def fits(self) -> int:
        """Checks the memory estimate (kept in `size`); returns the most pods alive at once."""
        grid, facts = self.grid, self.facts
        edges: list[tuple[float, int]] = []
        pod_steps = 0
        for pod in facts.pods.values():
            if pod.node is None or (pod.created or -math.inf) < grid.measured_start:
                continue
            _, _, start, end = pod_times(pod, facts, None)
            pod_steps += max(1, math.ceil((min(end, grid.end) - start) / grid.step) + 1)
            edges += [(start, 1), (end, -1)]
        alive = most = 0
        for _, change in sorted(edges):
            alive += change
            most = max(most, alive)
        size = Size(
            nodes=sum(1 for n in facts.nodes.values() if n.cores),
            steps=grid.steps,
            pods=len(facts.pods),
            pod_steps=pod_steps,
            answer_samples=self.ask.max_samples,
            step=grid.step,
            runs=max(1, self.ask.jobs),
        )
        self.size = size
        problem = check(size, self.ask.max_memory)
        if problem is not None:
            raise problem
        return most

    def fine(self, alive: int, progress: Progress) -> None:
        ask, grid, facts = self.ask, self.grid, self.facts
        inventory = NodeInventory(by_ip=dict(facts.ips))
        last = grid.time(grid.steps - 1)
        nodes = max(1, len(facts.nodes))
        for answer in self.range(ask.cpu_query, grid.start, last, grid.step, nodes):
            facts.fold_node_cpu(answer.result, lambda x: node_of(x, ask.node_label, inventory))
            progress("node CPU", answer.done)
        if facts.unnamed is not None and "node_cpu" not in facts.seen:
            raise problems.unnamed_nodes(facts.unnamed, ask.node_label)
        usage = queries.usage_query(ask.selection.namespaces, grid.measured_start)
        for answer in self.range(usage, grid.measured_start, last, grid.step, max(1, alive)):
            facts.fold_usage(answer.result)
            progress("pods' CPU", answer.done)


@dataclass(frozen=True, slots=True)
class Collected:
    facts: Facts
    notes: list[str]
    size: Size


def collect(
    source: Source, ask: Ask, now: float, progress: Progress, *, url: str, auth: str, policy: str
) -> Collected:
    collector = Collector(source, ask, url, auth, policy)
    with collector.asking():
        source.probe()
    collector.covered(now)
    collector.windows(progress)
    collector.check_present()
    alive = collector.fits()
    collector.fine(alive, progress)
    assert collector.size is not None
    return Collected(collector.facts, collector.notes, collector.size)


def _ceil(grid: Grid, window: float) -> float:
    """The grid's end, rounded up to a whole window."""
    return grid.start + math.ceil(grid.steps * grid.step / window) * window
