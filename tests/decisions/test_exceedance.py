"""extender.decisions.shadow, exceedance: whether the node a placement went to went over its
policy's threshold within the window, as the snapshots after it show (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.shadow import (
    OUTCOMES,
    VERDICTS,
    Exceedances,
    Outcome,
    Threshold,
    Verdict,
    Watch,
    every_count,
    threshold_of,
)
from tests.harness.fixtures import NOW, make_settings

CPU = Threshold("cpu", 0.9)
WINDOW = 300.0


def snapshot(at: float, cpu: Mapping[str, float], fetched: bool = True) -> Snapshot:
    """The cpu values, fetched by the refresh taken at `at` (or, `fetched` False, kept from
    an earlier one because the query failed)."""
    series = MetricSeries(dict(cpu), at if fetched else at - 60, None if fetched else "down")
    return Snapshot({"cpu": series}, at, int(at))


def place(
    ledger: Exceedances, node: str, at: float, verdict: Verdict = "best", window: float = WINDOW
) -> Watch:
    return ledger.placed(node, "default", verdict, CPU, at, window)


def outcomes(ledger: Exceedances) -> dict[tuple[str, str], int]:
    return {(v, o): n for (_, v, o), n in ledger.counts.items() if n}


# --- the threshold ---------------------------------------------------------------------------


def test_the_threshold_is_the_herd_metrics_filter_above() -> None:
    metrics = [
        {"name": "memory", "filter": {"above": 0.8}},
        {"name": "cpu", "filter": {"above": 0.85}},
    ]
    settings = make_settings(metrics=metrics, herdGuard={"enabled": True, "metric": "cpu"})
    assert threshold_of(settings.default) == Threshold("cpu", 0.85)
    assert str(threshold_of(settings.default)) == "cpu above 0.85"


def test_without_a_herd_metric_the_first_filter_above() -> None:
    metrics = [
        {"name": "memory"},
        {"name": "disk", "filter": {"below": 0.1}},
        {"name": "cpu", "filter": {"above": 0.85}},
    ]
    off = make_settings(metrics=metrics, herdGuard={"enabled": False})
    assert off.default.herd_metric is None
    assert threshold_of(off.default) == Threshold("cpu", 0.85)
    # The herd metric without a filter.above: the same fallback.
    memory = make_settings(metrics=metrics, herdGuard={"enabled": True, "metric": "memory"})
    assert memory.default.herd_metric == "memory"
    assert threshold_of(memory.default) == Threshold("cpu", 0.85)


def test_a_policy_with_no_filter_above_is_not_watched() -> None:
    settings = make_settings(metrics=[{"name": "cpu"}, {"name": "x", "filter": {"below": 1}}])
    assert threshold_of(settings.default) is None


# --- outcomes --------------------------------------------------------------------------------


def test_a_node_that_goes_over_within_the_window_exceeded() -> None:
    ledger = Exceedances(keep=100)
    watch = place(ledger, "a", NOW, "rejected")
    ledger.installed(snapshot(NOW + 15, {"a": 0.5}))
    assert watch.detail()["outcome"] == "waiting" and ledger.waiting == 1
    ledger.installed(snapshot(NOW + 30, {"a": 0.95}))
    assert (watch.outcome, watch.settled_at, watch.value) == ("exceeded", NOW + 30, 0.95)
    assert outcomes(ledger) == {("rejected", "exceeded"): 1} and ledger.waiting == 0
    # settled once: the node staying over adds nothing
    ledger.installed(snapshot(NOW + 45, {"a": 0.99}))
    assert outcomes(ledger) == {("rejected", "exceeded"): 1}
    assert watch.detail() == {
        "threshold": "cpu above 0.9",
        "until": NOW + WINDOW,
        "outcome": "exceeded",
        "at": NOW + 30,
        "value": 0.95,
    }


def test_at_the_threshold_is_not_over_and_the_window_closes_under() -> None:
    ledger = Exceedances(keep=100)
    watch = place(ledger, "a", NOW)
    ledger.installed(snapshot(NOW + 15, {"a": 0.9}))  # the filter's `above`: not over
    ledger.installed(snapshot(NOW + WINDOW, {"a": 0.5}))  # the window's last moment
    assert watch.detail()["outcome"] == "waiting"
    ledger.installed(snapshot(NOW + WINDOW + 15, {"a": 0.99}))  # too late
    assert (watch.outcome, watch.settled_at) == ("under", NOW + WINDOW)
    assert outcomes(ledger) == {("best", "under"): 1}
    assert watch.detail()["outcome"] == "under"


def test_the_last_moment_of_the_window_counts() -> None:
    ledger = Exceedances(keep=100)
    watch = place(ledger, "a", NOW)
    ledger.installed(snapshot(NOW + WINDOW, {"a": 0.95}))
    assert watch.outcome == "exceeded"


def test_a_snapshot_taken_before_the_placement_is_no_evidence() -> None:
    """The refresh fetched before the pod was placed, and installed after: its values
    predate the placement."""
    ledger = Exceedances(keep=100)
    watch = place(ledger, "a", NOW)
    ledger.installed(snapshot(NOW - 1, {"a": 0.95}))
    ledger.installed(snapshot(NOW, {"a": 0.95}))  # taken at the same moment: not after
    assert watch.outcome is None and ledger.waiting == 1
    ledger.installed(snapshot(NOW + WINDOW + 1, {}))
    assert watch.outcome == "unobserved"  # no snapshot after it had the node


def test_no_fresh_value_in_the_window_is_unobserved_not_under() -> None:
    ledger = Exceedances(keep=100)
    down = place(ledger, "a", NOW)  # the metric's queries fail the whole window
    gone = place(ledger, "b", NOW)  # the node has no series
    nan = place(ledger, "c", NOW)  # a NaN value
    for t in range(15, int(WINDOW) + 1, 15):
        ledger.installed(snapshot(NOW + t, {"a": 0.99}, fetched=False))
        ledger.installed(snapshot(NOW + t + 1, {"c": float("nan")}))
    ledger.installed(snapshot(NOW + 2 * WINDOW, {"a": 0.1, "b": 0.1, "c": 0.1}))
    assert (down.outcome, gone.outcome, nan.outcome) == ("unobserved",) * 3
    assert outcomes(ledger) == {("best", "unobserved"): 3}


def test_the_policys_own_window_and_threshold_per_placement() -> None:
    ledger = Exceedances(keep=100)
    short = place(ledger, "a", NOW, window=30)
    long = place(ledger, "a", NOW, window=300)
    memory = ledger.placed("a", "batch", "top3", Threshold("memory", 0.5), NOW, 300)
    ledger.installed(snapshot(NOW + 15, {"a": 0.5}))
    later = Snapshot(
        {"cpu": MetricSeries({"a": 0.95}, NOW + 60), "memory": MetricSeries({"a": 0.4}, NOW + 60)},
        NOW + 60,
    )
    ledger.installed(later)
    assert (short.outcome, long.outcome, memory.outcome) == ("under", "exceeded", None)
    assert ledger.counts["batch", "top3", "under"] == 0


def test_a_window_that_ends_first_is_not_judged_after_it_closed() -> None:
    """Windows close oldest first; one that ends before an older one's (a placement's own
    window, shorter) waits its turn, and no later snapshot counts against it."""
    ledger = Exceedances(keep=100)
    old = place(ledger, "a", NOW, window=300)
    new = place(ledger, "a", NOW + 10, window=30)
    ledger.installed(snapshot(NOW + 20, {"a": 0.5}))
    ledger.installed(snapshot(NOW + 100, {"a": 0.95}))  # after `new`'s window
    assert (old.outcome, new.outcome) == ("exceeded", None)
    ledger.installed(snapshot(NOW + 400, {}))
    assert new.outcome == "under" and ledger.waiting == 0


def test_memory_is_bounded_by_keep_the_oldest_dropped() -> None:
    ledger = Exceedances(keep=3)
    first = place(ledger, "a", NOW)
    ledger.installed(snapshot(NOW + 1, {"a": 0.95}))
    assert first.outcome == "exceeded"
    watches = [place(ledger, f"n{i}", NOW + 2 + i) for i in range(5)]
    # `first` (settled) went without loss; then the two oldest waiting were let go
    assert [w.outcome for w in watches] == ["dropped", "dropped", None, None, None]
    assert ledger.waiting == 3 and len(ledger) == 3
    assert outcomes(ledger) == {("best", "exceeded"): 1, ("best", "dropped"): 2}
    ledger.installed(snapshot(NOW + 10, {"n0": 0.99, "n4": 0.99}))  # n0 is gone
    assert [w.outcome for w in watches] == ["dropped", "dropped", None, None, "exceeded"]


def test_placements_out_of_time_order_still_settle() -> None:
    ledger = Exceedances(keep=2)
    later = place(ledger, "a", NOW + 5)
    earlier = place(ledger, "a", NOW)  # the clock stepped back
    place(ledger, "b", NOW + 6)  # the oldest in the queue (`later`) is let go
    assert later.outcome == "dropped" and earlier.outcome is None
    ledger.installed(snapshot(NOW + 7, {"a": 0.95}))
    assert earlier.outcome == "exceeded"


class CountingValues(dict[str, float]):
    """A metric's node values that count the nodes looked up."""

    looked: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.looked += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> float:
        self.looked += 1
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("a snapshot's nodes are never walked")

    def items(self) -> Any:
        raise AssertionError("a snapshot's nodes are never walked")


def test_a_snapshot_costs_one_lookup_per_node_with_placements_waiting() -> None:
    """15,000 nodes, 3 of them with placements waiting (40 placements): 3 look-ups; a
    node over the threshold settles all of its placements at once; none waiting, none."""
    values = CountingValues({f"node-{i}": 0.5 for i in range(15_000)})
    values["node-7"] = 0.95
    ledger = Exceedances(keep=1000)
    for i in range(40):
        place(ledger, ("node-7", "node-8", "node-9")[i % 3], NOW + i)
    ledger.installed(Snapshot({"cpu": MetricSeries(values, NOW + 60)}, NOW + 60))
    assert values.looked == 3
    assert outcomes(ledger) == {("best", "exceeded"): 14} and ledger.waiting == 26
    values.looked = 0
    ledger.installed(Snapshot({"cpu": MetricSeries(values, NOW + 400)}, NOW + 400))
    assert values.looked == 0 and ledger.waiting == 0  # every window closed first
    assert outcomes(ledger) == {("best", "exceeded"): 14, ("best", "under"): 26}


def test_the_summary_per_verdict_and_overall() -> None:
    ledger = Exceedances(keep=100)
    place(ledger, "hot", NOW, "rejected")
    place(ledger, "hot", NOW, "other")
    place(ledger, "cool", NOW, "best")
    place(ledger, "cool", NOW, "best")
    place(ledger, "none", NOW, "best")
    place(ledger, "cool", NOW + 200, "top3")
    ledger.installed(snapshot(NOW + 60, {"hot": 0.95, "cool": 0.2}))
    ledger.installed(snapshot(NOW + 360, {"cool": 0.2}))
    doc = ledger.summary({"default": CPU, "batch": None}, WINDOW)
    assert doc == {
        "window": WINDOW,
        "thresholds": {"default": "cpu above 0.9", "batch": None},
        "byVerdict": {
            "best": {"judged": 2, "exceeded": 0, "share": 0.0},
            "top3": {"judged": 0, "exceeded": 0, "share": None},
            "other": {"judged": 1, "exceeded": 1, "share": 1.0},
            "rejected": {"judged": 1, "exceeded": 1, "share": 1.0},
        },
        "overall": {"judged": 4, "exceeded": 2, "share": 0.5},
        "waiting": 1,
        "unobserved": 1,
        "dropped": 0,
    }


def test_every_count_has_a_zero_for_each_policy_verdict_and_outcome() -> None:
    ledger = Exceedances(keep=10)
    place(ledger, "a", NOW)
    ledger.installed(snapshot(NOW + 1, {"a": 0.95}))
    counts = every_count(["default", "batch"], ledger.counts)
    assert len(counts) == 2 * len(VERDICTS) * len(OUTCOMES)
    assert counts["default", "best", "exceeded"] == 1
    assert sum(counts.values()) == 1


# --- against a reference: each placement judged alone, by every snapshot ---------------------


def reference(
    events: list[tuple[str, float, Any]], window: float
) -> list[tuple[str, Threshold, float, Outcome]]:
    """Each placement's outcome, the slow way: every snapshot after it and in its window."""
    snaps = [(t, s) for kind, t, s in events if kind == "snapshot"]
    out = []
    for _, at, (node, threshold) in (e for e in events if e[0] == "place"):
        seen = [
            s.metrics[threshold.metric].values.get(node)
            for t, s in snaps
            if at < t <= at + window and s.metrics[threshold.metric].fetched_at == t
        ]
        values = [v for v in seen if v is not None]
        outcome: Outcome = (
            "exceeded"
            if any(v > threshold.above for v in values)
            else "under"
            if values
            else "unobserved"
        )
        out.append((node, threshold, at, outcome))
    return out


NODES = ["a", "b", "c", "d"]
THRESHOLDS = [Threshold("cpu", 0.9), Threshold("cpu", 0.7), Threshold("memory", 0.8)]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, float, Any]]:
    """Placements and snapshots in time order; a snapshot's metrics each fetched or not,
    with some nodes missing."""
    t = NOW
    events: list[tuple[str, float, Any]] = []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0.0, 5.0, 15.0, 40.0]))
        if draw(st.booleans()):
            node = draw(st.sampled_from(NODES))
            events.append(("place", t, (node, draw(st.sampled_from(THRESHOLDS)))))
        else:
            metrics = {}
            for metric in ("cpu", "memory"):
                values = draw(
                    st.dictionaries(
                        st.sampled_from(NODES),
                        st.sampled_from([0.5, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0]),
                    )
                )
                fetched = draw(st.booleans())
                metrics[metric] = MetricSeries(values, t if fetched else t - 1)
            events.append(("snapshot", t, Snapshot(metrics, t)))
    return events


@hypothesis.given(histories(), st.sampled_from([10.0, 30.0, 60.0]))
def test_every_outcome_is_the_references(
    events: list[tuple[str, float, Any]], window: float
) -> None:
    ledger = Exceedances(keep=1000)
    watches = []
    for kind, t, what in events:
        if kind == "place":
            node, threshold = what
            watches.append(ledger.placed(node, "p", "best", threshold, t, window))
        else:
            ledger.installed(what)
    end = events[-1][1] + window + 1
    ledger.installed(Snapshot({"cpu": MetricSeries(), "memory": MetricSeries()}, end))
    got = [(w.node, w.threshold, w.at, w.outcome) for w in watches]
    assert got == reference(events, window)
    assert ledger.waiting == 0
    assert sum(ledger.counts.values()) == len(watches)


@pytest.mark.parametrize("keep", [1, 5])
def test_the_bound_holds_through_any_history(keep: int) -> None:
    ledger = Exceedances(keep=keep)
    for i in range(200):
        place(ledger, NODES[i % 4], NOW + i)
        if i % 7 == 0:
            ledger.installed(snapshot(NOW + i + 0.5, {"a": 0.95, "b": 0.5}))
        assert len(ledger) <= keep and ledger.waiting <= keep
    assert sum(ledger.counts.values()) + ledger.waiting == 200
