"""extender.errors.backoff: the one back-off policy of every retry loop, and its bounds."""

from __future__ import annotations

import random

import pytest

from extender.errors.backoff import MAX_EXPONENT, Backoff
from extender.errors.rounds import MAX_BACKOFF_FACTOR, backoff


def test_the_ceiling_doubles_from_the_base_up_to_the_cap() -> None:
    policy = Backoff(base=1.0, cap=30.0)
    assert [policy.ceiling(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert policy.ceiling(0) == policy.ceiling(1) == 1.0  # no failure counts as the first
    assert Backoff(base=0.5, cap=100.0).ceiling(3) == 2.0


def test_a_huge_failure_count_stays_at_the_cap_without_overflow() -> None:
    policy = Backoff(base=0.1, cap=600.0)
    assert policy.ceiling(10**9) == 600.0
    assert policy.ceiling(MAX_EXPONENT + 5) == 600.0
    assert 0.0 <= policy.wait(10**9) <= 600.0


@pytest.mark.parametrize("floor", [0.0, 0.5, 2.0])
def test_every_wait_lies_between_the_floor_and_the_ceiling(floor: float) -> None:
    policy = Backoff(base=2.0, cap=20.0, floor=floor, rng=random.Random(1))
    for failures in range(1, 12):
        ceiling = max(policy.ceiling(failures), floor)
        waits = [policy.wait(failures) for _ in range(500)]
        assert all(floor <= w <= ceiling for w in waits), failures
        # Full jitter spreads the draws over the whole range, not around one value.
        span = ceiling - floor
        if span > 0:
            assert min(waits) < floor + 0.1 * span and max(waits) > ceiling - 0.1 * span


def test_a_floor_at_the_base_waits_exactly_the_base_after_one_failure() -> None:
    policy = Backoff(base=15.0, cap=120.0, floor=15.0, rng=random.Random(2))
    assert {policy.wait(1) for _ in range(20)} == {15.0}
    assert 15.0 <= policy.wait(2) <= 30.0


def test_the_same_seed_draws_the_same_waits_and_replicas_do_not_move_in_lockstep() -> None:
    first = Backoff(base=1.0, cap=30.0, rng=random.Random(42))
    again = Backoff(base=1.0, cap=30.0, rng=random.Random(42))
    assert [first.wait(n) for n in range(1, 9)] == [again.wait(n) for n in range(1, 9)]
    # Two replicas that failed together (different seeds) retry at different moments.
    replicas = [Backoff(base=1.0, cap=30.0, rng=random.Random(seed)) for seed in range(10)]
    assert len({round(r.wait(5), 6) for r in replicas}) == 10


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"base": 0.0, "cap": 1.0}, "base must be > 0"),
        ({"base": 1.0, "cap": 0.5}, "cap (0.5) must be >= its base (1.0)"),
        ({"base": 1.0, "cap": 5.0, "floor": 6.0}, "floor must be within 0..cap"),
        ({"base": 1.0, "cap": 5.0, "floor": -1.0}, "floor must be within 0..cap"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused_with_its_reason(
    kwargs: dict[str, float], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        Backoff(kwargs["base"], kwargs["cap"], kwargs.get("floor", 0.0))


def test_checking_loops_wait_one_interval_then_up_to_eight() -> None:
    rng = random.Random(3)
    assert backoff(10.0, 0, rng) == 10.0  # succeeding rounds: the interval, undrawn
    for failures, ceiling in ((1, 20.0), (2, 40.0), (3, 80.0), (9, 80.0)):
        waits = [backoff(10.0, failures, rng) for _ in range(200)]
        assert all(10.0 <= w <= ceiling for w in waits), failures
    assert MAX_BACKOFF_FACTOR * 10.0 == 80.0
