"""How much memory a replay will take, known before its large queries are asked.

After the window queries the replay knows the nodes, the steps, and every pod it will
move with its lifetime, so the fine part (node CPU per step, each replayed pod's use per
step of its life, the arrays of each row replayed at once) can be counted before it is
fetched. The figures per item are what the arrays hold (float32 traces, float64
background, load and ledger, the recorder's two float64 per node-step) plus a margin for
Python objects; tests/benchmarks/test_replay_quick.py holds the estimate above what the
command and its workers took together.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.replay.problems import TooLarge, gib, too_large

NODE_STEP = 4 + 8
"""Bytes per node and step held once: its CPU trace and its background."""
RUN_NODE_STEP = 80
"""Bytes per node and step each run at once holds: its load (8), the recorder's CPU and
demand (16), the ledger's three running sums (24), and what the models keep besides
(their pipelines, the peers' windows, the heap a run leaves behind): a week of 500 nodes
took about 800 MiB a worker (tests/benchmarks/replay.py)."""
POD_STEP = 4 + 4
"""Bytes per replayed pod and step of its life: the fetched trace and its filled copy."""
STEP = 400
"""Bytes per step: the recorder's band, the tick loop's bookkeeping."""
POD = 3000
"""Bytes per pod: its facts, its ReplayPod and PodSpec, its events."""
SAMPLE = 200
"""Bytes per sample of one parsed answer (orjson's lists, floats and strings)."""
BASE = 200 * 2**20
"""The interpreter, the libraries, the engine."""
STEPS = (60, 120, 300)
"""Steps suggested when the range is too large, in seconds: none coarser than the stock
rules' 5-minute window, past which the replay no longer sees what the metric saw."""


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    steps: int
    pods: int
    pod_steps: int
    """Steps of life of the pods the replay moves, summed."""
    answer_samples: int
    step: float
    runs: int = 1
    """Rows replayed at once (--jobs)."""

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
    """A problem naming the size and what would fit, or None when it fits."""
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
