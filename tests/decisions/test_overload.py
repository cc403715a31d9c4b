"""extender.decisions.overload: which nodes should carry the overload taint (pure, clocks
driven by the test)."""

from __future__ import annotations

from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.overload import OverloadState, Watched, decide, trend_of

CPU = Watched("cpu", above=0.9, hysteresis=0.05, max_age=60)
FOR = 120.0
T0 = 1_800_000_000.0


def snap(values: dict[str, float], at: float, error: str | None = None) -> Snapshot:
    return Snapshot({"cpu": MetricSeries(values, at, error)}, at, int(at))


def run(
    state: OverloadState,
    values: dict[str, float],
    at: float,
    tainted: dict[str, str] | None = None,
    fraction: float = 1.0,
    error: str | None = None,
) -> list[tuple[str, str]]:
    changes = decide(
        state, [CPU], snap(values, at, error), sorted(values), tainted or {}, FOR, fraction, at
    )
    return [(c.node, c.action) for c in changes]


def test_a_node_hot_for_for_seconds_is_tainted_and_untainted_once_cool_as_long() -> None:
    state = OverloadState()
    assert run(state, {"a": 0.95, "b": 0.5}, T0) == []
    assert run(state, {"a": 0.95, "b": 0.5}, T0 + FOR - 1) == []
    assert run(state, {"a": 0.95, "b": 0.5}, T0 + FOR) == [("a", "taint")]
    tainted = {"a": "cpu"}
    # Just under the threshold is not cool (hysteresis): the taint stays.
    assert run(state, {"a": 0.88, "b": 0.5}, T0 + FOR + 10, tainted) == []
    assert run(state, {"a": 0.8, "b": 0.5}, T0 + FOR + 20, tainted) == []
    assert run(state, {"a": 0.8, "b": 0.5}, T0 + 2 * FOR + 19, tainted) == []
    assert run(state, {"a": 0.8, "b": 0.5}, T0 + 2 * FOR + 20, tainted) == [("a", "untaint")]


def test_a_dip_restarts_the_clock() -> None:
    state = OverloadState()
    run(state, {"a": 0.95}, T0)
    run(state, {"a": 0.85}, T0 + 60)  # between: neither hot nor cool
    assert run(state, {"a": 0.95}, T0 + FOR) == []
    assert run(state, {"a": 0.95}, T0 + 60 + 2 * FOR) == [("a", "taint")]


def test_at_most_the_fraction_the_hottest_first() -> None:
    state = OverloadState()
    values = {f"n{i:02d}": 0.5 for i in range(20)}
    for i in range(10):
        values[f"n{i:02d}"] = 0.91 + i / 100  # n09 hottest
    run(state, values, T0, fraction=0.3)
    changes = run(state, values, T0 + FOR, fraction=0.3)
    assert changes == [(f"n{i:02d}", "taint") for i in (9, 8, 7, 6, 5, 4)]
    # Six carry it: no room for more until one cools.
    tainted = dict.fromkeys((n for n, _ in changes), "cpu")
    assert run(state, values, T0 + FOR + 30, tainted, fraction=0.3) == []


def test_missing_stale_or_failed_data_changes_nothing() -> None:
    state = OverloadState()
    run(state, {"a": 0.95, "b": 0.95}, T0)
    # b's series goes missing for a while: its clock stops, a's goes on.
    assert run(state, {"a": 0.95}, T0 + FOR) == [("a", "taint")]
    # A failed refresh (Prometheus down): the last values are kept for scoring, but they
    # are no evidence: neither a taint nor an untaint.
    tainted = {"a": "cpu"}
    assert run(state, {"a": 0.2, "b": 0.99}, T0 + 3 * FOR, tainted, error="down") == []
    # Stale data (older than maxAge) is none either.
    stale = decide(state, [CPU], snap({"a": 0.2}, T0), ["a"], tainted, FOR, 1.0, T0 + 9 * FOR)
    assert stale == []
    assert trend_of("zz", [CPU], snap({"a": 0.2}, T0), T0) is None
    assert decide(state, [], snap({"a": 0.99}, T0), ["a"], {}, FOR, 1.0, T0) == []


def test_nodes_that_left_are_forgotten() -> None:
    state = OverloadState()
    run(state, {"a": 0.95, "b": 0.95}, T0)
    run(state, {"a": 0.95}, T0 + 1)
    assert set(state.clocks) == {"a"}
