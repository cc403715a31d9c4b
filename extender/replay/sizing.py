"""How much memory a replay will take, known after the window queries (nodes, steps, pods'
lifetimes); tests/benchmarks/test_replay_quick.py holds the estimate above what is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.replay.problems import TooLarge, gib, too_large

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
