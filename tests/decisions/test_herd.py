"""extender.decisions.herd: reservations that fade as the metric's window covers the pod."""

from __future__ import annotations

import pytest

from extender.decisions.herd import HerdLedger, Reservation, unshown_share
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.usage import UsageTable
from extender.policy.sections import HerdGuardSettings
from tests.harness.fixtures import NOW

GUARD = HerdGuardSettings(settle=30.0)


def snapshot(fetched_at: float, usage: UsageTable | None = None) -> Snapshot:
    series = {"cpu": MetricSeries(values={"a": 0.2}, fetched_at=fetched_at)}
    return Snapshot(series, fetched_at, 1, usage or UsageTable())


def ledger(window: float = 60.0, guard: HerdGuardSettings = GUARD) -> HerdLedger:
    herd = HerdLedger(guard, guarded=True, window=window)
    herd.set_node_cores({"a": 4.0})
    herd.install(snapshot(NOW - 15), ("cpu",))
    return herd


@pytest.mark.parametrize(
    ("data_at", "window", "share"),
    [
        (None, 60.0, 1.0),  # never fetched: nothing shows
        (NOW + 10, 60.0, 1.0),  # inside settle: the newest sample predates the pod
        (NOW + 30, 60.0, 1.0),  # settle just over: nothing of the window covers it yet
        (NOW + 45, 60.0, 0.75),  # a quarter of the window covers the pod
        (NOW + 60, 60.0, 0.5),
        (NOW + 90, 60.0, 0.0),  # the whole window covers it
        (NOW + 500, 60.0, 0.0),
        (NOW + 29, 0.0, 1.0),  # no window (a gauge): whole until settle ...
        (NOW + 30, 0.0, 0.0),  # ... then shown at once (the old 30 s cliff)
        (NOW + 180, 300.0, 0.5),  # a 5-minute rate: half of it after 150 s
    ],
)
def test_the_unshown_share_falls_over_the_window(
    data_at: float | None, window: float, share: float
) -> None:
    assert unshown_share(NOW, data_at, 30.0, window) == pytest.approx(share)


def test_a_reservation_fades_with_each_snapshot_and_is_dropped_when_shown() -> None:
    herd = ledger()
    assert herd.reserve(Reservation("u1", "a", 2.0, NOW))
    assert not herd.reserve(Reservation("u1", "a", 2.0, NOW))  # one UID counts once
    assert herd.load["a"] == pytest.approx(0.5)  # 2 of 4 cores, whole
    herd.install(snapshot(NOW + 45), ("cpu",))
    assert herd.load["a"] == pytest.approx(0.375)  # three quarters left
    herd.install(snapshot(NOW + 75), ("cpu",))
    assert herd.load["a"] == pytest.approx(0.125)
    herd.install(snapshot(NOW + 90), ("cpu",))
    assert "a" not in herd.load and "u1" not in herd.reservations


def test_projected_is_what_install_gives() -> None:
    herd = ledger()
    herd.reserve(Reservation("u1", "a", 2.0, NOW))
    herd.reserve(Reservation("u2", "a", 1.0, NOW + 20))
    later = snapshot(NOW + 60)
    projected = herd.projected(later, ("cpu",))
    herd.install(later, ("cpu",))
    assert projected == pytest.approx(dict(herd.load))


def test_a_measured_pod_counts_at_its_own_use_while_fresh() -> None:
    herd = ledger()
    herd.reserve(Reservation("u1", "a", 2.0, NOW, pod=("ns", "web-1")))
    measured = UsageTable(pods={("ns", "web-1"): 0.4}, fetched_at=NOW + 40)
    herd.install(snapshot(NOW + 40, measured), ("cpu",))
    # 0.4 cores, a sixth of the window covers it: 0.4 * (1 - 10/60) / 4
    assert herd.load["a"] == pytest.approx(0.4 * (5 / 6) / 4)
    stale = UsageTable(pods={("ns", "web-1"): 0.4}, fetched_at=NOW + 40 - 1000)
    herd.install(snapshot(NOW + 40, stale), ("cpu",))
    assert herd.load["a"] == pytest.approx(2.0 * (5 / 6) / 4)  # back to the estimate


def test_by_request_the_own_use_is_not_read() -> None:
    herd = ledger(guard=GUARD.model_copy(update={"estimate": "request"}))
    herd.reserve(Reservation("u1", "a", 2.0, NOW, pod=("ns", "web-1")))
    measured = UsageTable(pods={("ns", "web-1"): 0.4}, fetched_at=NOW + 30)
    herd.install(snapshot(NOW + 30, measured), ("cpu",))
    assert herd.load["a"] == pytest.approx(0.5)


def test_release_and_a_removed_node() -> None:
    herd = ledger()
    herd.reserve(Reservation("u1", "a", 2.0, NOW))
    herd.reserve(Reservation("u2", "b", 1.0, NOW))
    herd.reserve(Reservation("u3", "b", 1.0, NOW))
    assert herd.release("u1") == "a" and "a" not in herd.load
    assert herd.release("u1") is None
    assert sorted(herd.drop_node("b")) == ["u2", "u3"]
    assert not herd.reservations and not herd.load


def test_load_after_victims_leave_and_the_preemptor_arrives() -> None:
    herd = ledger()
    herd.reserve(Reservation("v1", "a", 2.0, NOW))
    herd.reserve(Reservation("v2", "a", 1.0, NOW))
    assert herd.load_after("a", ["v1"], 0.5) == pytest.approx((1.0 + 0.5) / 4)
    assert herd.load_after("a", ["v1", "v2", "elsewhere"], 0.0) == pytest.approx(0.0)
    assert herd.load_after("z", [], 2.0) == pytest.approx(2.0 / GUARD.default_node_cores)


def test_node_cores_change_the_share() -> None:
    herd = ledger()
    herd.reserve(Reservation("u1", "a", 2.0, NOW))
    herd.set_node_cores({"a": 8.0})
    assert herd.load["a"] == pytest.approx(0.25)


def test_unguarded_counts_nothing() -> None:
    herd = HerdLedger(GUARD, guarded=False, window=60.0)
    assert not herd.reserve(Reservation("u1", "a", 2.0, NOW))
    assert herd.load_after("a", [], 2.0) == 0.0


def test_a_departure_is_credited_while_the_metric_still_shows_it() -> None:
    """A pod that used 2 cores of a's 4 leaves at NOW: the metric shows it whole until
    settle, then less over the window; its credit follows (negative load), the same fade
    as a placed pod's reservation, and is dropped once shown."""
    herd = ledger()
    assert herd.release("gone", ("a", 2.0, NOW)) == "a"
    assert herd.load["a"] == pytest.approx(-0.5)
    assert not herd.release("gone", ("a", 2.0, NOW))  # once per pod
    herd.install(snapshot(NOW + 45), ("cpu",))
    assert herd.load["a"] == pytest.approx(-0.375)
    projected = herd.projected(snapshot(NOW + 60), ("cpu",))
    herd.install(snapshot(NOW + 60), ("cpu",))
    assert projected == pytest.approx(dict(herd.load))
    assert herd.load == pytest.approx({"a": -0.25})
    herd.install(snapshot(NOW + 90), ("cpu",))
    assert "a" not in herd.load


def test_a_departure_is_credited_only_what_the_metric_showed_of_it() -> None:
    """Placed at NOW and gone at NOW + 45 (a quarter shown): its reservation goes and a
    quarter of its use is credited; a use nobody knows is credited nothing; a node that
    left takes its credits with it."""
    herd = ledger()
    herd.reserve(Reservation("young", "a", 2.0, NOW))
    herd.install(snapshot(NOW + 45), ("cpu",))
    herd.release("young", ("a", 2.0, NOW + 45))
    assert herd.load["a"] == pytest.approx(-0.5 * 0.25)
    assert herd.release("unknown", ("a", None, NOW + 45)) is None
    herd.drop_node("a")
    assert herd.load == {}
