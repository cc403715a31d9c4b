"""What a replay replays: the time grid (a lead-in, then the measured range), nodes with
their background, pods. Step k covers [start + k*step, start + (k+1)*step).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Grid:
    start: float
    step: float
    steps: int
    measured_from: int  # the first measured step: `--from`

    def __post_init__(self) -> None:
        if self.step <= 0 or self.steps < 1:
            raise ValueError("a grid needs a positive step and at least one step")
        if not 0 <= self.measured_from < self.steps:
            raise ValueError("the measured range must start inside the grid")

    def time(self, k: int) -> float:
        return self.start + k * self.step

    def index(self, t: float) -> int:
        return math.floor((t - self.start) / self.step + 1e-9)

    @property
    def end(self) -> float:
        return self.start + self.steps * self.step

    @property
    def measured_start(self) -> float:
        return self.time(self.measured_from)


class Role(StrEnum):
    REPLAYED = "replayed"
    EARLIER = "arrived before the range"
    OTHER_SCHEDULER = "another scheduler's"
    PINNED = "pinned to its node"
    OUTSIDE = "outside the namespaces replayed"
    NEVER_RAN = "never ran"


@dataclass(slots=True)
class ReplayNode:
    name: str
    cores: float
    memory: int  # allocatable bytes (0: unknown, left out of the scores as upstream does)
    max_pods: int
    first: int
    last: int
    background: array[float]
    """Cores busy per step with what no scheduler replays (0 outside [first, last])."""
    taints: tuple[str, ...] = ()


@dataclass(slots=True)
class ReplayPod:
    namespace: str
    name: str
    uid: str
    role: Role
    why: str  # why the role (e.g. "DaemonSet", "nodeSelector", "scheduler my-scheduler")
    node: str | None  # where it really ran (None: never)
    arrival: float
    bound: float
    start: float  # when its measured use began
    end: float
    cpu_milli: int
    memory: int
    usage: array[float] = field(default_factory=lambda: array("f"))
    """Cores used per step from the step holding `start` on (replayed pods)."""
    workload: str | None = None  # `kind namespace/name` of its owner, from the stock owner rule
    tolerations: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def startup(self) -> float:
        return max(0.0, self.start - self.bound)

    @property
    def runs(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass(slots=True)
class History:
    grid: Grid
    nodes: dict[str, ReplayNode]
    pods: list[ReplayPod]
    notes: list[str] = field(default_factory=list)
