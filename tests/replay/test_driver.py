"""The replay of a hand-made History: the real run gives back the measured CPU, a pod's
use follows it wherever a model puts it, pods that keep their node count in
kube-scheduler's cache, waiting pods are retried, nodes join and leave."""

from __future__ import annotations

from array import array
from dataclasses import replace
from pathlib import Path

import pytest

from extender.policy.loading import load_settings
from extender.replay.driver import replay
from extender.replay.model import Grid, History, ReplayNode, ReplayPod, Role
from extender.replay.models import DECICE, KUBE_SCHEDULER, SCHEDULERS, Options, build
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = load_settings(ROOT / "config" / "extender.yaml", {})
START, STEP, STEPS, MEASURED = 1_000_000.0, 30.0, 60, 10
GRID = Grid(START, STEP, STEPS, MEASURED)
PIPELINE = Pipeline(scrape_interval=30)


def at(k: float) -> float:
    return START + k * STEP


def node(name: str, cores: float, busy: float, first: int = 0, last: int = STEPS - 1) -> ReplayNode:
    background = array("d", [busy * cores if first <= k <= last else 0.0 for k in range(STEPS)])
    return ReplayNode(name, cores, 16 * 2**30, 110, first, last, background)


def pod(
    name: str,
    where: str | None,
    arrival: float,
    *,
    role: Role = Role.REPLAYED,
    cpu: int = 250,
    usage: list[float] | None = None,
    start: float | None = None,
    end: float | None = None,
) -> ReplayPod:
    start = arrival if start is None else start
    end = GRID.end if end is None else end
    return ReplayPod(
        "shop", name, f"uid-{name}", role, "", where, arrival, arrival, start, end, cpu,
        2**28, array("f", usage or []),
    )  # fmt: skip


def run(history: History, name: str | None) -> RunResult:
    model = None if name is None else build(name, SETTINGS, Options())
    return replay(history, model, PIPELINE)


def cpu_at(result: RunResult, k: int) -> float:
    """The busiest node's CPU at step k (the bands keep it per step)."""
    return next(b.max for b in result.bands if b.t == k * STEP)


def test_the_real_run_is_the_measured_cpu() -> None:
    # node-a measured 100 % from step 20 to 27: 3 cores unseen + the replayed pod's 1 core.
    history = History(
        GRID,
        {"node-a": node("node-a", 4, 0.75)},
        [pod("web", "node-a", at(20), usage=[1.0] * 8, end=at(28))],
    )
    result = run(history, None)
    assert [cpu_at(result, k) for k in (19, 20, 27, 28)] == [0.75, 1.0, 1.0, 0.75]
    assert result.metrics.node_minutes_hot == 8 * STEP / 60
    assert result.placements == {"uid-web": "node-a"}


def test_use_follows_the_pod_and_starts_after_its_startup_delay() -> None:
    # Bound at step 20, its use began 2 steps later: replayed at step 30, it uses the same
    # ramp from step 32 on.
    p = pod("web", "node-a", at(20), usage=[0.5, 1.0, 1.5], start=at(22), end=at(25))
    p.arrival = at(30)
    history = History(GRID, {"node-b": node("node-b", 2, 0.0)}, [p])
    result = run(history, KUBE_SCHEDULER)
    assert result.placements == {"uid-web": "node-b"}
    assert [cpu_at(result, k) for k in range(31, 36)] == [0.0, 0.25, 0.5, 0.75, 0.0]


def test_pods_that_keep_their_node_fill_kube_schedulers_cache() -> None:
    history = History(
        GRID,
        {"node-a": node("node-a", 4, 0.1), "node-b": node("node-b", 4, 0.1)},
        [
            pod("big", "node-a", at(2), role=Role.EARLIER, cpu=3900),
            pod("web", "node-b", at(15), cpu=500, usage=[0.5]),
        ],
    )
    assert run(history, KUBE_SCHEDULER).placements == {"uid-web": "node-b"}


def test_a_pod_that_fits_nowhere_waits_until_room_frees() -> None:
    history = History(
        GRID,
        {"node-a": node("node-a", 1, 0.1)},
        [
            pod("other", "node-a", at(0), role=Role.OTHER_SCHEDULER, cpu=1000, end=at(20)),
            pod("web", "node-a", at(12), cpu=500, usage=[0.5] * 10, end=at(22)),
        ],
    )
    result = run(history, KUBE_SCHEDULER)
    assert result.placements == {"uid-web": "node-a"}
    assert (result.metrics.waited, result.metrics.unplaced) == (1, 0)
    # minutes from its arrival until the other pod left, and at most the half step the
    # replay's ticks add before the retry that places it
    least = (at(20) - at(12)) / 60
    assert least <= result.metrics.wait_max <= least + STEP / 2 / 60
    assert result.metrics.wait_p95 == result.metrics.wait_max  # one pod waited
    assert cpu_at(result, 19) == pytest.approx(0.1)
    assert cpu_at(result, 20) == pytest.approx(0.6)  # placed when the other pod left


def test_a_pod_that_never_fits_is_left_unplaced_and_pending_pods_are_not_offered() -> None:
    history = History(
        GRID,
        {"node-a": node("node-a", 1, 0.1)},
        [
            pod("huge", "node-a", at(12), cpu=8000, usage=[1.0]),
            pod("pending", None, at(12), role=Role.NEVER_RAN),
        ],
    )
    result = run(history, KUBE_SCHEDULER)
    assert result.unplaced == frozenset({"uid-huge"})
    assert (result.metrics.pods, result.metrics.unplaced) == (1, 1)


def test_nodes_join_and_leave() -> None:
    history = History(
        GRID,
        {"old": node("old", 4, 0.2, last=24), "new": node("new", 4, 0.2, first=25)},
        [
            pod("web-1", "old", at(12), usage=[1.0] * 40),
            pod("web-2", "old", at(30), usage=[1.0] * 20),
        ],
    )
    result = run(history, KUBE_SCHEDULER)
    assert result.placements == {"uid-web-1": "old", "uid-web-2": "new"}
    assert cpu_at(result, 24) == pytest.approx(0.45)
    assert cpu_at(result, 26) == pytest.approx(0.2)  # web-1 left with its node
    assert cpu_at(result, 31) == pytest.approx(0.45)


def test_ours_keeps_off_a_node_hot_with_unseen_work() -> None:
    history = History(
        GRID,
        {"hot": node("hot", 4, 0.95), "calm": node("calm", 4, 0.2)},
        [pod(f"web-{i}", "hot", at(12 + 2 * i), usage=[0.25] * 20) for i in range(8)],
    )
    ours = run(history, DECICE)
    assert set(ours.placements.values()) == {"calm"}
    assert ours.metrics.placed_on_hot == 0


def test_every_model_replays() -> None:
    history = History(
        GRID,
        {"a": node("a", 4, 0.3), "b": node("b", 8, 0.6)},
        [pod(f"web-{i}", "a", at(11 + i), usage=[0.5] * 30) for i in range(12)],
    )
    for name in SCHEDULERS:
        result = run(history, name)
        assert result.scheduler == name
        assert len(result.placements) == 12 and result.overcommitted == 0


def test_deferring_our_installs_to_the_next_decision_changes_no_placement() -> None:
    # Busy nodes, pods arriving in bursts and leaving in between: every decision reads the
    # answer of the refresh before it, deferred or not.
    nodes = {f"n{i}": node(f"n{i}", 4, 0.2 + 0.15 * i) for i in range(5)}
    pods = [
        pod(f"web-{i}", "n0", at(11 + (i // 3) * 1.7), usage=[0.2 + 0.1 * (i % 7)] * (5 + i % 11))
        for i in range(60)
    ]
    history = History(GRID, nodes, pods)
    runs = [
        replay(history, build(DECICE, SETTINGS, Options(), defer=defer), PIPELINE)
        for defer in (False, True)
    ]
    assert runs[0].placements == runs[1].placements
    assert runs[0].metrics == runs[1].metrics
    assert len(set(runs[0].placements.values())) > 2  # decisions that differ by node


def test_rows_on_two_cores_are_the_rows_on_one() -> None:
    from extender.replay.driver import Work, run_all

    history = History(
        GRID,
        {"a": node("a", 4, 0.3), "b": node("b", 8, 0.6)},
        [pod(f"web-{i}", "a", at(11 + i), usage=[0.5] * 30) for i in range(12)],
    )
    work = Work(history, SETTINGS, Options(), PIPELINE)
    seen: list[float] = []
    cpu: dict[str, float] = {}
    one = run_all(work, 1, seen.append, (DECICE, KUBE_SCHEDULER))
    two = run_all(work, 2, seen.append, (DECICE, KUBE_SCHEDULER), cpu)
    assert list(one) == list(two) == ["as-it-happened", KUBE_SCHEDULER, DECICE]
    for name in one:
        assert one[name].metrics == two[name].metrics
        assert one[name].placements == two[name].placements
    assert seen[-1] == 1.0
    assert list(cpu) != [] and set(cpu) == set(two) and all(v > 0 for v in cpu.values())


def test_ours_as_shipped_moves_its_pods_off_a_node_the_load_moved_onto() -> None:
    """Unseen work moves from b to a at step 30, where our pods of a Deployment run: the
    rebalancer (the shipped policy evicts) moves them to b, each successor using what its
    pod had left, so a's CPU drops back; kube-scheduler's row moves nothing."""

    def moving(name: str, before: float, after: float) -> ReplayNode:
        busy = array("d", [4 * (before if k < 30 else after) for k in range(STEPS)])
        return ReplayNode(name, 4, 16 * 2**30, 110, 0, STEPS - 1, busy)

    web = [
        replace(pod(f"web-{i}", "a", at(11 + i), usage=[0.5] * 40), workload="deployment shop/web")
        for i in range(3)
    ]
    history = History(GRID, {"a": moving("a", 0.2, 0.85), "b": moving("b", 0.85, 0.2)}, web)
    ours = run(history, DECICE)
    assert set(ours.placements[p.uid] for p in web) == {"a"}
    assert ours.metrics.moved > 0
    moved = {uid: node for uid, node in ours.placements.items() if "~" in uid}
    assert len(moved) == ours.metrics.moved and set(moved.values()) == {"b"}
    assert cpu_at(ours, 50) < cpu_at(run(history, KUBE_SCHEDULER), 50)
    assert run(history, KUBE_SCHEDULER).metrics.moved == 0
