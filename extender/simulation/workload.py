"""Nodes, workloads, and pods whose real CPU use differs from what they request: a
workload's pods share its request and usage distribution, so its running pods tell what
its next pod will use. DISTRIBUTION, printed in every report, is the claim about a cluster.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TypeVar

T = TypeVar("T")

EPOCH = 1_000_000.0  # simulated time 0 on the engine's clock
MIB = 1024**2
GIB = 1024**3
MAX_PODS = 110  # the kubelet's default `maxPods`

NODE_SIZES: tuple[tuple[int, int, float], ...] = ((8, 32, 0.6), (16, 64, 0.3), (4, 16, 0.1))
CPU_REQUESTS: tuple[tuple[int, float], ...] = (
    (100, 0.25),
    (250, 0.30),
    (500, 0.25),
    (1000, 0.15),
    (2000, 0.05),
)
HOG_REQUESTS: tuple[tuple[int, float], ...] = ((100, 0.3), (250, 0.4), (500, 0.3))
"""A hog asks for little: a pod asking 2 cores and using 10 is mis-sized, not mis-requested."""
GIB_PER_CORE = (1, 2, 4)
IDLE_SHARE = 0.15
IDLE_FACTOR = (0.02, 0.1)
HOG_SHARE = 0.10
HOG_FACTOR = (3.0, 5.0)
NORMAL_MEDIAN, NORMAL_SIGMA = 0.8, 0.5
POD_SIGMA = 0.25  # a pod's use around its workload's
WORKLOADS_PER_NODE = 0.5
POPULARITY_SIGMA = 0.5
DURATION_MEDIAN, DURATION_SIGMA = 20 * 60.0, 0.8
DURATION_CLIP = (60.0, 3 * 3600.0)
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.SafeEncodeString

DISTRIBUTION = f"""\
nodes: 60% 8 cores / 32 GiB, 30% 16 cores / 64 GiB, 10% 4 cores / 16 GiB; {MAX_PODS} pods at most.
workloads: Deployments, {WORKLOADS_PER_NODE:g} per node (at least 4); each pod of the stream \
belongs to one,
  picked by popularity (lognormal weights, sigma {POPULARITY_SIGMA}); a workload's pods share \
its requests:
  CPU 100m 25%, 250m 30%, 500m 25%, 1 core 15%, 2 cores 5% of the workloads that are not hogs,
  100m 30%, 250m 40%, 500m 30% of the hogs (mean {{request:.3f}} cores);
  memory = the CPU request x 1, 2 or 4 GiB per core (equal odds). No CPU limits.
real CPU use = request x the workload's factor x the pod's own (lognormal, sigma {POD_SIGMA}),
  constant while the pod runs; of the workloads exactly {IDLE_SHARE:.0%} are idle (factor \
uniform {IDLE_FACTOR[0]}..{IDLE_FACTOR[1]}),
  {HOG_SHARE:.0%} hogs (uniform {HOG_FACTOR[0]:g}..{HOG_FACTOR[1]:g}), the rest lognormal \
(median {NORMAL_MEDIAN}, sigma {NORMAL_SIGMA});
  mean factor of a pod ~{{factor:.2f}}, of a requested core ~{{per_core:.2f}} (hogs ask for \
little).
  Memory use = the memory request (not time-varying).
duration: lognormal, median {DURATION_MEDIAN / 60:g} min, sigma {DURATION_SIGMA}, \
clipped to 1 min..3 h (mean ~{{duration:.0f}} min).
arrivals: a Poisson stream whose rate keeps requests at --load of the cluster's allocatable
  CPU in steady state (or --pods pods spread over the run).
background: per node, a level plus AR(1) noise (phi 0.98, stationary sd ~0.05), every
  15 s, in [0, 1] of the node's cores: work the scheduler cannot see (system daemons,
  pods of other schedulers, noisy neighbours). It uses no memory. A node short of CPU
  serves everyone on it in proportion (what a pod's own CPU series then shows)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    cores: int
    memory: int
    added_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    template_hash: str
    cpu_milli: int
    memory: int
    factor: float  # what its pods use, as a multiple of their CPU request
    popularity: float = 1.0

    @property
    def replicaset(self) -> str:
        return f"{self.name}-{self.template_hash}"


@dataclass(frozen=True, slots=True)
class PodSpec:
    uid: str
    cpu_milli: int
    memory: int
    usage: float  # cores the pod really uses while it runs
    arrival: float
    duration: float
    workload: str = ""  # its Deployment ("" for a bare pod)
    template_hash: str = ""
    cpu_limit_milli: int | None = None

    @property
    def cores(self) -> float:
        return self.cpu_milli / 1000

    @property
    def replicaset(self) -> str:
        return f"{self.workload}-{self.template_hash}" if self.workload else ""


def _pick(rng: random.Random, table: Sequence[tuple[T, float]]) -> T:
    x = rng.random()
    for value, share in table:
        x -= share
        if x < 0:
            return value
    return table[-1][0]


def make_nodes(rng: random.Random, count: int) -> list[NodeSpec]:
    sizes = [((cores, gib), share) for cores, gib, share in NODE_SIZES]
    out = []
    for i in range(count):
        cores, gib = _pick(rng, sizes)
        out.append(NodeSpec(f"node-{i:03d}", cores, gib * GIB))
    return out


def make_workload(
    rng: random.Random, name: str, factor: float | None = None, cpu_milli: int = 0, kind: str = ""
) -> Workload:
    """A workload drawn from DISTRIBUTION (of `kind`); `factor` and `cpu_milli` pin a draw."""
    cpu_milli = cpu_milli or _pick(rng, HOG_REQUESTS if kind == "hog" else CPU_REQUESTS)
    memory = cpu_milli * rng.choice(GIB_PER_CORE) * GIB // 1000
    if factor is None and kind in ("idle", "hog"):
        factor = rng.uniform(*(IDLE_FACTOR if kind == "idle" else HOG_FACTOR))
    elif factor is None:
        factor = rng.lognormvariate(math.log(NORMAL_MEDIAN), NORMAL_SIGMA)
    popularity = rng.lognormvariate(0.0, POPULARITY_SIGMA)
    template_hash = "".join(rng.choice(HASH_ALPHABET) for _ in range(10))
    return Workload(name, template_hash, cpu_milli, memory, factor, popularity)


def make_workloads(rng: random.Random, count: int) -> list[Workload]:
    """`count` workloads, their kinds in DISTRIBUTION's exact shares, shuffled."""
    idle, hog = round(count * IDLE_SHARE), round(count * HOG_SHARE)
    kinds = ["idle"] * idle + ["hog"] * hog + ["normal"] * (count - idle - hog)
    rng.shuffle(kinds)
    return [make_workload(rng, f"app-{i:03d}", kind=kind) for i, kind in enumerate(kinds)]


def make_pods(
    rng: random.Random, times: Sequence[float], workloads: Sequence[Workload], prefix: str = "pod"
) -> list[PodSpec]:
    weights = list(accumulate(w.popularity for w in workloads))
    picked = rng.choices(workloads, cum_weights=weights, k=len(times))
    pods = []
    for i, (t, w) in enumerate(zip(times, picked, strict=True)):
        factor = w.factor * rng.lognormvariate(0.0, POD_SIGMA)
        duration = rng.lognormvariate(math.log(DURATION_MEDIAN), DURATION_SIGMA)
        duration = min(max(duration, DURATION_CLIP[0]), DURATION_CLIP[1])
        use = w.cpu_milli / 1000 * factor
        uid = f"{prefix}-{i:05d}"
        pods.append(PodSpec(uid, w.cpu_milli, w.memory, use, t, duration, w.name, w.template_hash))
    return pods


def _means() -> tuple[float, float, float, float, float]:
    """Mean cores requested by a workload not a hog and a hog; mean factor of each kind."""
    most = sum(m / 1000 * share for m, share in CPU_REQUESTS)
    hogs = sum(m / 1000 * share for m, share in HOG_REQUESTS)
    normal = NORMAL_MEDIAN * math.exp(NORMAL_SIGMA**2 / 2)
    return most, hogs, sum(IDLE_FACTOR) / 2, sum(HOG_FACTOR) / 2, normal


def mean_request() -> float:
    most, hogs, *_ = _means()
    return (1 - HOG_SHARE) * most + HOG_SHARE * hogs


def mix_request(workloads: Sequence[Workload]) -> float:
    total = sum(w.popularity for w in workloads)
    return sum(w.cpu_milli / 1000 * w.popularity for w in workloads) / total


def mean_factor() -> float:
    _, _, idle, hog, normal = _means()
    kinds = IDLE_SHARE * idle + HOG_SHARE * hog + (1 - IDLE_SHARE - HOG_SHARE) * normal
    return kinds * math.exp(POD_SIGMA**2 / 2)


def use_per_request() -> float:
    """Cores used per core requested (hogs ask for little)."""
    most, hogs, idle, hog, normal = _means()
    rest = 1 - IDLE_SHARE - HOG_SHARE
    not_hog = (IDLE_SHARE * idle + rest * normal) / (IDLE_SHARE + rest)
    used = (1 - HOG_SHARE) * most * not_hog + HOG_SHARE * hogs * hog
    return used / mean_request() * math.exp(POD_SIGMA**2 / 2)


def mean_duration() -> float:
    return DURATION_MEDIAN * math.exp(DURATION_SIGMA**2 / 2)


def distribution_text() -> str:
    return DISTRIBUTION.format(
        factor=mean_factor(),
        duration=mean_duration() / 60,
        request=mean_request(),
        per_core=use_per_request(),
    )


def stream_rate(nodes: Sequence[NodeSpec], load: float, request: float | None = None) -> float:
    """Pods a second that keep requests at `load` of the nodes' CPU (Little's law)."""
    cores = sum(n.cores for n in nodes)
    return load * cores / ((request or mean_request()) * mean_duration())


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
