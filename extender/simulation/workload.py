"""Nodes, and pods whose real CPU use differs from what they request.

The whole point of a metrics-aware scheduler is that requests lie: some pods idle, a few
use several times what they asked for. The distribution below is the simulation's claim
about a cluster; it is printed in every report (DISTRIBUTION) so a reader can judge it.
Everything is drawn from a `random.Random` the caller seeds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

MIB = 1024**2
GIB = 1024**3
MAX_PODS = 110
"""The kubelet's default `maxPods`: NodeResourcesFit also filters on the pod count."""

NODE_SIZES: tuple[tuple[int, int, float], ...] = ((8, 32, 0.6), (16, 64, 0.3), (4, 16, 0.1))
"""(cores, GiB of memory, share of the nodes)."""
CPU_REQUESTS: tuple[tuple[int, float], ...] = (
    (100, 0.25),
    (250, 0.30),
    (500, 0.25),
    (1000, 0.15),
    (2000, 0.05),
)
"""(millicores requested, share of the pods)."""
GIB_PER_CORE = (1, 2, 4)
IDLE_SHARE = 0.15
IDLE_FACTOR = (0.02, 0.1)
HOG_SHARE = 0.10
HOG_FACTOR = (3.0, 5.0)
NORMAL_MEDIAN, NORMAL_SIGMA = 0.8, 0.5
DURATION_MEDIAN, DURATION_SIGMA = 20 * 60.0, 0.8
DURATION_CLIP = (60.0, 3 * 3600.0)

DISTRIBUTION = f"""\
nodes: 60% 8 cores / 32 GiB, 30% 16 cores / 64 GiB, 10% 4 cores / 16 GiB; {MAX_PODS} pods at most.
pods: CPU request 100m 25%, 250m 30%, 500m 25%, 1 core 15%, 2 cores 5% (mean 0.475 cores);
  memory request = the CPU request x 1, 2 or 4 GiB per core (equal odds).
real CPU use = request x factor, constant while the pod runs, no CPU limit:
  {IDLE_SHARE:.0%} idle (factor uniform {IDLE_FACTOR[0]}..{IDLE_FACTOR[1]}), \
{HOG_SHARE:.0%} hogs (uniform {HOG_FACTOR[0]:g}..{HOG_FACTOR[1]:g}),
  the rest lognormal (median {NORMAL_MEDIAN}, sigma {NORMAL_SIGMA}); mean factor ~{{factor:.2f}}.
duration: lognormal, median {DURATION_MEDIAN / 60:g} min, sigma {DURATION_SIGMA}, \
clipped to 1 min..3 h (mean ~{{duration:.0f}} min).
arrivals: a Poisson stream whose rate keeps requests at --load of the cluster's allocatable
  CPU in steady state (or --pods pods spread over the run).
background: per node, a level plus AR(1) noise (phi 0.98, stationary sd ~0.05), every
  15 s, in [0, 1] of the node's cores: work the scheduler cannot see (system daemons,
  pods of other schedulers, noisy neighbours)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    cores: int
    memory: int
    """Allocatable bytes."""
    added_at: float = 0.0
    """Seconds after the start when the node joins (0: there from the start)."""


@dataclass(frozen=True, slots=True)
class PodSpec:
    uid: str
    cpu_milli: int
    memory: int
    usage: float
    """Cores the pod really uses while it runs."""
    arrival: float
    duration: float
    """Seconds it runs once placed (waiting does not count)."""

    @property
    def cores(self) -> float:
        return self.cpu_milli / 1000


def _pick(rng: random.Random, table: Sequence[tuple[T, float]]) -> T:
    """One value of a (value, share) table."""
    x = rng.random()
    for value, share in table:
        x -= share
        if x < 0:
            return value
    return table[-1][0]


def make_nodes(rng: random.Random, count: int, prefix: str = "node") -> list[NodeSpec]:
    sizes = [((cores, gib), share) for cores, gib, share in NODE_SIZES]
    out = []
    for i in range(count):
        cores, gib = _pick(rng, sizes)
        out.append(NodeSpec(f"{prefix}-{i:03d}", cores, gib * GIB))
    return out


def usage_factor(rng: random.Random) -> float:
    """Real use / request: idle, hog or normal (see DISTRIBUTION)."""
    kind = rng.random()
    if kind < IDLE_SHARE:
        return rng.uniform(*IDLE_FACTOR)
    if kind < IDLE_SHARE + HOG_SHARE:
        return rng.uniform(*HOG_FACTOR)
    return rng.lognormvariate(math.log(NORMAL_MEDIAN), NORMAL_SIGMA)


def make_pod(rng: random.Random, uid: str, arrival: float) -> PodSpec:
    cpu = _pick(rng, CPU_REQUESTS)
    memory = cpu * rng.choice(GIB_PER_CORE) * GIB // 1000
    factor = usage_factor(rng)
    duration = rng.lognormvariate(math.log(DURATION_MEDIAN), DURATION_SIGMA)
    duration = min(max(duration, DURATION_CLIP[0]), DURATION_CLIP[1])
    return PodSpec(uid, cpu, memory, cpu / 1000 * factor, arrival, duration)


def mean_request() -> float:
    """Cores a pod requests on average."""
    return sum(m / 1000 * share for m, share in CPU_REQUESTS)


def mean_factor() -> float:
    """Real use / request on average (the three kinds' means, weighted)."""
    normal = NORMAL_MEDIAN * math.exp(NORMAL_SIGMA**2 / 2)
    idle = sum(IDLE_FACTOR) / 2
    hog = sum(HOG_FACTOR) / 2
    return IDLE_SHARE * idle + HOG_SHARE * hog + (1 - IDLE_SHARE - HOG_SHARE) * normal


def mean_duration() -> float:
    """Seconds a pod runs on average (the lognormal's mean; clipping moves it little)."""
    return DURATION_MEDIAN * math.exp(DURATION_SIGMA**2 / 2)


def distribution_text() -> str:
    return DISTRIBUTION.format(factor=mean_factor(), duration=mean_duration() / 60)


def stream_rate(nodes: Sequence[NodeSpec], load: float) -> float:
    """Pods a second that keep requests at `load` of the nodes' CPU (Little's law)."""
    cores = sum(n.cores for n in nodes)
    return load * cores / (mean_request() * mean_duration())


def arrivals(rng: random.Random, start: float, end: float, rate: float) -> list[float]:
    """A Poisson stream of arrival times in [start, end)."""
    out: list[float] = []
    if rate <= 0:
        return out
    t = start + rng.expovariate(rate)
    while t < end:
        out.append(t)
        t += rng.expovariate(rate)
    return out


def make_pods(
    rng: random.Random, times: Sequence[float], prefix: str = "pod", first: int = 0
) -> list[PodSpec]:
    return [make_pod(rng, f"{prefix}-{first + i:05d}", t) for i, t in enumerate(times)]
