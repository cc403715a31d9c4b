"""extender.metrics.heap: the heap frozen after each install stays flat over a soak of
refreshes, garbage cycles that got frozen are collected by the periodic (or regrowth)
collection, and what a refresh replaces is freed at once. Object counts, never times."""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator

import pytest

from extender.decisions.engine import Engine
from extender.decisions.model import Snapshot
from extender.metrics.heap import FrozenHeap
from extender.metrics.providers import StaticProvider
from extender.metrics.refresher import Refresher
from tests.harness.fixtures import make_settings

NODES = 2000


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.collect()


class Cycle:
    """An object in a reference cycle: freed only by the collector."""

    def __init__(self) -> None:
        self.me = self
        self.payload = [object() for _ in range(10)]


def live_cycles() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Cycle)) + sum(
        1 for o in _frozen() if isinstance(o, Cycle)
    )


def _frozen() -> list[object]:
    """The frozen objects (unfrozen for the count, then frozen again)."""
    gc.unfreeze()
    objects = gc.get_objects()
    gc.freeze()
    return objects


def refresher(heap: FrozenHeap, values: dict[str, dict[str, float]]) -> Refresher:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}, {"name": "memory"}],
        prometheus={"interval": 3600},
    )
    engine = Engine(settings, Snapshot.empty(["cpu", "memory"]), 0.0)
    return Refresher(settings, engine, StaticProvider(values), heap=heap)


def cluster(seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    return {
        f"node-{i}": {"cpu": round(rng.random(), 3), "memory": round(rng.random(), 3)}
        for i in range(NODES)
    }


async def test_a_soak_of_refreshes_keeps_the_frozen_heap_flat() -> None:
    heap = FrozenHeap(every=10_000)  # no periodic collection: growth would show
    values = cluster(1)
    r = refresher(heap, values)
    sizes = []
    for i in range(60):
        values.update(cluster(i))  # new values every refresh: new tables each time
        await r.refresh_once()
        if i in (10, 59):
            sizes.append(gc.get_freeze_count())
    # Each install freezes the new snapshot and tables; the ones it replaced were freed
    # by reference counting, frozen or not: 50 refreshes later, no more is frozen.
    assert sizes[1] <= sizes[0] * 1.02 + 500, sizes
    assert heap.collections == 1  # the first install's only


async def test_frozen_garbage_cycles_are_collected_every_so_many_installs() -> None:
    heap = FrozenHeap(every=5)
    r = refresher(heap, cluster(2))
    gc.disable()  # no automatic young collection: only the heap's own collections free
    try:
        for i in range(23):
            Cycle()  # garbage at once, but only the collector frees a cycle
            await r.refresh_once()
            if i == 3:
                assert live_cycles() == 3  # frozen with the heap: nothing walks them...
        # ...until the periodic collection (installs 1, 6, 11, 16, 21): 2 wait now.
        assert heap.collections == 5
        assert live_cycles() == 2
    finally:
        gc.enable()


async def test_a_grown_process_collects_at_the_next_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resident = [100_000_000]
    monkeypatch.setattr("extender.metrics.heap.resident_bytes", lambda: resident[0])
    heap = FrozenHeap(every=10_000)
    r = refresher(heap, cluster(3))
    await r.refresh_once()
    await r.refresh_once()
    assert (heap.collections, heap.baseline) == (1, 100_000_000)
    resident[0] = 160_000_000  # past 1.5x
    await r.refresh_once()
    assert (heap.collections, heap.baseline) == (2, 160_000_000)
    await r.refresh_once()
    assert heap.collections == 2
