"""extender.errors.rounds.Pace: at most `per_second` starts a second, on a fake clock."""

from __future__ import annotations

from extender.errors.rounds import Pace


async def test_a_pace_waits_out_what_is_left_of_the_interval() -> None:
    now = [100.0]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 6))
        now[0] += seconds

    pace = Pace(sleep, clock=lambda: now[0])
    await pace.turn(4.0)  # the first start never waits
    now[0] += 0.05  # the work took 50 ms
    await pace.turn(4.0)  # 200 ms of the 250 ms interval left
    now[0] += 0.3  # slower than the pace: no wait
    await pace.turn(4.0)
    await pace.turn(10.0)  # a new rate counts from the last start
    assert waits == [0.2, 0.1]
