"""tests/benchmarks/shadow.py runs at a small size: placements judged, and installs timed
with placements waiting on a share of the nodes over the threshold."""

from __future__ import annotations

import random

from tests.benchmarks.shadow import install_ms, run


def test_the_benchmark_runs_small() -> None:
    rng = random.Random(7)
    assert run(50, 40, rng) > 0
    for hot in (0.0, 0.5):
        assert install_ms(200, 100, 3, hot, rng) >= 0
