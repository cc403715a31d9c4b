"""The scenarios: each a pure function of a seed (and a size), so a run can be repeated.

For one seed every scenario draws the same nodes and the same pod stream (random streams
named `workload:<seed>`); each draws its own background levels (streams named
`<scenario>:<seed>`) and adds what it is about: busy nodes, a burst, a node turning hot,
a node joining. Background load is work the scheduler
cannot see: system daemons, pods of other schedulers, a noisy neighbour on the host.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from extender.simulation.workload import (
    GIB,
    NodeSpec,
    PodSpec,
    arrivals,
    make_nodes,
    make_pods,
    stream_rate,
)

BACKGROUND_STEP = 15.0
"""Seconds between background samples (the background is constant in between)."""
PHI, NOISE = 0.98, 0.01
"""AR(1) noise on a node's background level: x' = PHI x + N(0, NOISE); sd ~0.05."""
CALM = (0.2, 0.5)
BUSY = (0.75, 0.85)


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int = 100
    load: float = 0.25
    """Requests of the pod stream, as a share of the cluster's CPU, in steady state."""
    warmup: float = 3600.0
    """Seconds run before measuring: the cluster starts empty of pods."""
    duration: float = 7200.0
    """Seconds measured."""
    burst: int = 500
    pods: int | None = None
    """Pods in the stream over the whole run; None: as many as `load` asks."""

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
    """node -> share of its cores busy with unseen work, one value per BACKGROUND_STEP."""

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
    """Sorted by arrival."""
    size: Size
    seed: int


def _series(rng: random.Random, levels: Sequence[float]) -> tuple[float, ...]:
    """A background series around `levels` (one per step), AR(1) noise, within [0, 1]."""
    x = rng.gauss(0.0, NOISE / math.sqrt(1 - PHI**2))
    out = []
    for level in levels:
        out.append(min(1.0, max(0.0, level + x)))
        x = PHI * x + rng.gauss(0.0, NOISE)
    return tuple(out)


def _steps(size: Size) -> int:
    return math.ceil(size.end / BACKGROUND_STEP) + 1


def _calm(rng: random.Random, nodes: Sequence[NodeSpec], size: Size) -> dict[str, Sequence[float]]:
    steps = _steps(size)
    return {n.name: _series(rng, [rng.uniform(*CALM)] * steps) for n in nodes}


def _workload(seed: int, size: Size) -> tuple[list[NodeSpec], list[PodSpec]]:
    """The nodes and the pod stream every scenario of this seed shares."""
    rng = random.Random(f"workload:{seed}")
    nodes = make_nodes(rng, size.nodes)
    if size.pods is not None:
        times = sorted(rng.uniform(0.0, size.end) for _ in range(size.pods))
    else:
        times = arrivals(rng, 0.0, size.end, stream_rate(nodes, size.load))
    return nodes, make_pods(rng, times)


def _scenario(
    name: str,
    description: str,
    seed: int,
    size: Size,
    nodes: Sequence[NodeSpec],
    levels: Mapping[str, Sequence[float]],
    pods: Sequence[PodSpec],
) -> Scenario:
    ordered = tuple(sorted(pods, key=lambda p: (p.arrival, p.uid)))
    return Scenario(name, description, tuple(nodes), Background(levels), ordered, size, seed)


def uniform(seed: int, size: Size) -> Scenario:
    nodes, pods = _workload(seed, size)
    levels = _calm(random.Random(f"uniform:{seed}"), nodes, size)
    text = f"every node's background {CALM[0]:.0%}-{CALM[1]:.0%} of its cores"
    return _scenario("uniform", text, seed, size, nodes, levels, pods)


def skewed(seed: int, size: Size) -> Scenario:
    nodes, pods = _workload(seed, size)
    rng = random.Random(f"skewed:{seed}")
    levels = _calm(rng, nodes, size)
    busy = rng.sample(nodes, max(1, round(len(nodes) / 10)))
    for n in busy:
        levels[n.name] = _series(rng, [rng.uniform(*BUSY)] * _steps(size))
    text = (
        f"a tenth of the nodes ({len(busy)}) busy at {BUSY[0]:.0%}-{BUSY[1]:.0%} with work "
        f"the scheduler does not see; the rest {CALM[0]:.0%}-{CALM[1]:.0%}"
    )
    return _scenario("skewed", text, seed, size, nodes, levels, pods)


def burst(seed: int, size: Size) -> Scenario:
    nodes, pods = _workload(seed, size)
    levels = _calm(random.Random(f"burst:{seed}"), nodes, size)
    at = size.warmup + min(600.0, size.duration / 4)
    extra = make_pods(random.Random(f"burst-pods:{seed}"), [at] * size.burst, "burst")
    text = f"{size.burst} pods at once {(at - size.warmup) / 60:g} min into the measured time"
    return _scenario("burst", text, seed, size, nodes, levels, [*pods, *extra])


def hot_node(seed: int, size: Size) -> Scenario:
    nodes, pods = _workload(seed, size)
    rng = random.Random(f"hot-node:{seed}")
    levels = _calm(rng, nodes, size)
    hot = rng.choice(nodes)
    at = size.warmup + size.duration / 3
    calm, busy = rng.uniform(*CALM), rng.uniform(*BUSY)
    steps = _steps(size)
    switch = int(at // BACKGROUND_STEP)
    levels[hot.name] = _series(rng, [calm] * switch + [busy] * (steps - switch))
    text = (
        f"{hot.name} ({hot.cores} cores) turns hot, {calm:.0%} -> {busy:.0%} of unseen work, "
        f"{(at - size.warmup) / 60:g} min into the measured time"
    )
    return _scenario("hot-node", text, seed, size, nodes, levels, pods)


def new_node(seed: int, size: Size) -> Scenario:
    nodes, pods = _workload(seed, size)
    rng = random.Random(f"new-node:{seed}")
    levels = _calm(rng, nodes, size)
    at = size.warmup + size.duration / 3
    at = math.ceil(at / BACKGROUND_STEP) * BACKGROUND_STEP
    new = replace(NodeSpec("node-new", 8, 32 * GIB), added_at=at)
    levels[new.name] = _series(rng, [0.05] * _steps(size))
    text = f"an empty node (8 cores) joins {(at - size.warmup) / 60:g} min into the measured time"
    return _scenario("new-node", text, seed, size, [*nodes, new], levels, pods)


SCENARIOS: Mapping[str, Callable[[int, Size], Scenario]] = {
    "uniform": uniform,
    "skewed": skewed,
    "burst": burst,
    "hot-node": hot_node,
    "new-node": new_node,
}
