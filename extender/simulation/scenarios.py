"""The scenarios: each a pure function of a seed and a size. For one seed every scenario
draws the same nodes, workloads and pods (`workload:<seed>`), its own background
(`<scenario>:<seed>`: work no scheduler sees), and adds what it is about.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from extender.simulation.workload import (
    GIB,
    WORKLOADS_PER_NODE,
    NodeSpec,
    PodSpec,
    Workload,
    arrivals,
    make_nodes,
    make_pods,
    make_workload,
    make_workloads,
    mix_request,
    stream_rate,
)

BACKGROUND_STEP = 15.0
PHI, NOISE = 0.98, 0.01  # AR(1) noise on a background level: x' = PHI x + N(0, NOISE)
CALM = (0.2, 0.5)
BUSY = (0.75, 0.85)
OVER_FACTOR = (3.0, 10.0)
UNDER_FACTOR = 0.1
OVER_REQUESTS = (100, 250, 500)
UNDER_REQUESTS = (500, 1000, 2000)
MISREQUESTED_LOAD = 0.04  # misrequested's workloads' requests, of the cluster's CPU
DIURNAL_BASE = (0.25, 0.45)
DIURNAL_SWING = 0.2


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int = 100
    load: float = 0.25  # requests of the pod stream, as a share of the cluster's CPU
    warmup: float = 3600.0
    duration: float = 7200.0
    burst: int = 500
    pods: int | None = None  # pods in the stream; None: as many as `load` asks

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError("nodes must be at least 1")
        if self.warmup < 0 or self.duration <= 0:
            raise ValueError("warmup must be >= 0 and duration > 0")
        if self.load < 0 or self.burst < 0 or (self.pods is not None and self.pods < 0):
            raise ValueError("load, burst and pods must not be negative")

    @property
    def end(self) -> float:
        return self.warmup + self.duration


@dataclass(frozen=True, slots=True)
class Background:
    """node -> share of its cores busy with unseen work, per BACKGROUND_STEP."""

    levels: Mapping[str, Sequence[float]]

    def at(self, node: str, t: float) -> float:
        series = self.levels[node]
        return series[min(int(t // BACKGROUND_STEP), len(series) - 1)]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    nodes: tuple[NodeSpec, ...]
    background: Background
    pods: tuple[PodSpec, ...]
    size: Size
    seed: int
    workloads: tuple[Workload, ...] = ()


def _series(rng: random.Random, levels: Sequence[float]) -> tuple[float, ...]:
    x = rng.gauss(0.0, NOISE / math.sqrt(1 - PHI**2))
    out = []
    for level in levels:
        out.append(min(1.0, max(0.0, level + x)))
        x = PHI * x + rng.gauss(0.0, NOISE)
    return tuple(out)


def _steps(size: Size) -> int:
    return math.ceil(size.end / BACKGROUND_STEP) + 1


def _switching(
    rng: random.Random, size: Size, at: float, before: float, after: float
) -> tuple[float, ...]:
    switch = int(at // BACKGROUND_STEP)
    return _series(rng, [before] * switch + [after] * (_steps(size) - switch))


@dataclass(frozen=True, slots=True)
class Base:
    nodes: list[NodeSpec]
    workloads: list[Workload]
    pods: list[PodSpec]


def _workload(seed: int, size: Size) -> Base:
    rng = random.Random(f"workload:{seed}")
    nodes = make_nodes(rng, size.nodes)
    workloads = make_workloads(rng, max(4, round(size.nodes * WORKLOADS_PER_NODE)))
    if size.pods is not None:
        times = sorted(rng.uniform(0.0, size.end) for _ in range(size.pods))
    else:
        rate = stream_rate(nodes, size.load, mix_request(workloads))
        times = arrivals(rng, 0.0, size.end, rate)
    return Base(nodes, workloads, make_pods(rng, times, workloads))


def _calm_start(
    name: str, seed: int, size: Size
) -> tuple[Base, random.Random, dict[str, Sequence[float]]]:
    """The seed's workload, the scenario's RNG, and every node's calm background from it."""
    base, rng = _workload(seed, size), random.Random(f"{name}:{seed}")
    steps = _steps(size)
    return base, rng, {n.name: _series(rng, [rng.uniform(*CALM)] * steps) for n in base.nodes}


def _scenario(
    name: str,
    text: str,
    seed: int,
    size: Size,
    base: Base,
    levels: Mapping[str, Sequence[float]],
    more: Base | None = None,
) -> Scenario:
    more = more or Base([], [], [])
    pods = sorted([*base.pods, *more.pods], key=lambda p: (p.arrival, p.uid))
    nodes, workloads = (*base.nodes, *more.nodes), (*base.workloads, *more.workloads)
    return Scenario(name, text, nodes, Background(levels), tuple(pods), size, seed, workloads)


def _measured_at(size: Size, share: float) -> float:
    return math.ceil((size.warmup + size.duration * share) / BACKGROUND_STEP) * BACKGROUND_STEP


def _minutes_in(size: Size, at: float) -> str:
    return f"{(at - size.warmup) / 60:g} min into the measured time"


def uniform(seed: int, size: Size) -> Scenario:
    base, _, levels = _calm_start("uniform", seed, size)
    text = (
        f"every node's background {CALM[0]:.0%}-{CALM[1]:.0%} of its cores; the control: "
        "measured load has little to add, so it must not do worse than requests"
    )
    return _scenario("uniform", text, seed, size, base, levels)


def skewed(seed: int, size: Size) -> Scenario:
    base, rng, levels = _calm_start("skewed", seed, size)
    busy = rng.sample(base.nodes, max(1, round(len(base.nodes) / 10)))
    for n in busy:
        levels[n.name] = _series(rng, [rng.uniform(*BUSY)] * _steps(size))
    text = (
        f"a tenth of the nodes ({len(busy)}) busy at {BUSY[0]:.0%}-{BUSY[1]:.0%} with work "
        f"the scheduler does not see; the rest {CALM[0]:.0%}-{CALM[1]:.0%}: requests cannot "
        "see the busy nodes, a measured metric can"
    )
    return _scenario("skewed", text, seed, size, base, levels)


def burst(seed: int, size: Size) -> Scenario:
    base, _, levels = _calm_start("burst", seed, size)
    at = size.warmup + min(600.0, size.duration / 4)
    rng = random.Random(f"burst-pods:{seed}")
    extra = make_pods(rng, [at] * size.burst, base.workloads, "burst")
    text = (
        f"{size.burst} pods of the stream's workloads at once, {_minutes_in(size, at)}: "
        "faster than any metric shows them, so only what a scheduler reserves for the pods "
        "it just placed spreads them"
    )
    return _scenario("burst", text, seed, size, base, levels, Base([], [], extra))


def hot_node(seed: int, size: Size) -> Scenario:
    base, rng, levels = _calm_start("hot-node", seed, size)
    hot = rng.choice(base.nodes)
    at = size.warmup + size.duration / 3
    calm, busy = rng.uniform(*CALM), rng.uniform(*BUSY)
    levels[hot.name] = _switching(rng, size, at, calm, busy)
    text = (
        f"{hot.name} ({hot.cores} cores) turns hot, {calm:.0%} -> {busy:.0%} of unseen work, "
        f"{_minutes_in(size, at)}: how soon a scheduler stops placing there"
    )
    return _scenario("hot-node", text, seed, size, base, levels)


def new_node(seed: int, size: Size) -> Scenario:
    base, rng, levels = _calm_start("new-node", seed, size)
    at = _measured_at(size, 1 / 3)
    new = replace(NodeSpec("node-new", 8, 32 * GIB), added_at=at)
    levels[new.name] = _series(rng, [0.05] * _steps(size))
    text = (
        f"an empty node (8 cores) joins {_minutes_in(size, at)}: a node without metrics yet "
        "must neither be shunned nor flooded"
    )
    return _scenario("new-node", text, seed, size, base, levels, Base([new], [], []))


def moving_load(seed: int, size: Size) -> Scenario:
    base, rng, levels = _calm_start("moving-load", seed, size)
    tenth = max(1, round(len(base.nodes) / 10))
    chosen = rng.sample(base.nodes, min(len(base.nodes), 2 * tenth))
    first, second = chosen[:tenth], chosen[tenth:]
    at = _measured_at(size, 1 / 3)
    for n in first:
        levels[n.name] = _switching(rng, size, at, rng.uniform(*BUSY), rng.uniform(*CALM))
    for n in second:
        levels[n.name] = _switching(rng, size, at, rng.uniform(*CALM), rng.uniform(*BUSY))
    text = (
        f"unseen work at {BUSY[0]:.0%}-{BUSY[1]:.0%} moves from {len(first)} nodes to "
        f"{len(second)} others {_minutes_in(size, at)}: a metric that follows slowly keeps "
        "placing on the nodes that just turned busy"
    )
    return _scenario("moving-load", text, seed, size, base, levels)


def misrequested(seed: int, size: Size) -> Scenario:
    base, rng, levels = _calm_start("misrequested", seed, size)
    count = max(2, round(len(base.nodes) / 50))
    over = [
        make_workload(rng, f"over-{i:02d}", rng.uniform(*OVER_FACTOR), rng.choice(OVER_REQUESTS))
        for i in range(count)
    ]
    under = [
        make_workload(rng, f"under-{i:02d}", UNDER_FACTOR, rng.choice(UNDER_REQUESTS))
        for i in range(count)
    ]
    odd = [*over, *under]
    pods: list[PodSpec] = []
    for w in odd:  # an equal share of MISREQUESTED_LOAD by requests each
        rate = stream_rate(base.nodes, MISREQUESTED_LOAD / len(odd), w.cpu_milli / 1000)
        times = arrivals(rng, 0.0, size.end, rate)
        pods += make_pods(rng, times, [w], f"{w.name}-pod")
    at = size.warmup + min(600.0, size.duration / 4)
    each = max(1, size.burst // 5 // len(odd))
    for w in odd:
        pods += make_pods(rng, [at] * each, [w], f"{w.name}-burst")
    text = (
        f"{count} deployments use {OVER_FACTOR[0]:g}-{OVER_FACTOR[1]:g}x their CPU requests and "
        f"{count} a tenth; their pods arrive over the run and {each} each at once "
        f"{_minutes_in(size, at)}: requests misjudge them both ways, their running "
        "siblings' measured use does not"
    )
    more = Base([], odd, pods)
    return _scenario("misrequested", text, seed, size, base, levels, more)


def diurnal(seed: int, size: Size) -> Scenario:
    base = _workload(seed, size)
    rng = random.Random(f"diurnal:{seed}")
    peak = size.warmup + size.duration / 2
    steps = _steps(size)
    swing = [
        DIURNAL_SWING * math.cos(2 * math.pi * (k * BACKGROUND_STEP - peak) / size.end)
        for k in range(steps)
    ]
    levels = {}
    for n in base.nodes:
        level = rng.uniform(*DIURNAL_BASE)
        levels[n.name] = _series(rng, [level + s for s in swing])
    text = (
        f"every node's unseen work ({DIURNAL_BASE[0]:.0%}-{DIURNAL_BASE[1]:.0%}) swings together "
        f"by +-{DIURNAL_SWING:.0%} over a day compressed into the run, peak "
        f"{_minutes_in(size, peak)}: no node can be dodged at the peak; a scheduler must not "
        "pile pods on while the load rises"
    )
    return _scenario("diurnal", text, seed, size, base, levels)


SCENARIOS: Mapping[str, Callable[[int, Size], Scenario]] = {
    "uniform": uniform,
    "skewed": skewed,
    "burst": burst,
    "hot-node": hot_node,
    "new-node": new_node,
    "moving-load": moving_load,
    "misrequested": misrequested,
    "diurnal": diurnal,
}
