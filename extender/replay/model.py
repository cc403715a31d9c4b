"""What a replay replays: the time grid, the nodes with their background, the pods.

Step k covers [start + k*step, start + (k+1)*step) and holds the value a range query
answered at its start. The grid begins a lead-in before the measured range so the
pipeline is warm; pods arriving in the lead-in keep their real node.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Grid:
    start: float
    """Unix seconds of step 0 (the lead-in's start)."""
    step: float
    steps: int
    measured_from: int
    """The first measured step: `--from`."""

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
    """Placed again by each scheduler model, at its arrival."""
    EARLIER = "arrived before the range"
    OTHER_SCHEDULER = "another scheduler's"
    PINNED = "pinned to its node"
    OUTSIDE = "outside the namespaces replayed"
    NEVER_RAN = "never ran"
    """Pending throughout: stays Pending in every row."""


@dataclass(slots=True)
class ReplayNode:
    name: str
    cores: float
    memory: int
    """Allocatable bytes (0: unknown, left out of the scores as upstream does)."""
    max_pods: int
    first: int
    """The first and last steps it has a CPU value."""
    last: int
    background: array[float]
    """Cores busy per step with what no scheduler replays: its CPU less the replayed pods'
    use (0 outside [first, last])."""
    taints: tuple[str, ...] = ()
    """`key:effect` of its NoSchedule/NoExecute taints (named in warnings only)."""


@dataclass(slots=True)
class ReplayPod:
    namespace: str
    name: str
    uid: str
    role: Role
    why: str
    """Why the role (e.g. "DaemonSet", "nodeSelector", "scheduler my-scheduler")."""
    node: str | None
    """Where it really ran (None: never)."""
    arrival: float
    """Its creation."""
    bound: float
    """When really bound (its scheduled time, else its start)."""
    start: float
    """When its measured use began (its start time)."""
    end: float
    """When it really ended (the grid's end if still running)."""
    cpu_milli: int
    memory: int
    usage: array[float] = field(default_factory=lambda: array("f"))
    """Cores used per step from the step holding `start` on, gaps filled (replayed pods)."""
    workload: str | None = None
    """`kind namespace/name` of its owner, from the stock owner rule."""
    tolerations: tuple[str, ...] = ()
    """`key:effect` of tolerations beyond the defaults."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def startup(self) -> float:
        """Seconds from its bind to its use beginning (image pulls, init containers)."""
        return max(0.0, self.start - self.bound)

    @property
    def runs(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def mean_use(self) -> float:
        return sum(self.usage) / len(self.usage) if self.usage else 0.0


@dataclass(slots=True)
class History:
    grid: Grid
    nodes: dict[str, ReplayNode]
    pods: list[ReplayPod]
    notes: list[str] = field(default_factory=list)
    """What the reconstruction noticed (gaps filled, values clamped, inputs missing)."""
