"""extender.cluster.informer: list-then-watch, bookmarks, 410 restarts and back-off, with a
scripted watcher (the loopback API server's streams are tested in
tests/cluster/test_podwatch.py)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable
from typing import Any

import orjson
import pytest

from extender.cluster.informer import (
    FIRST_SYNC_ANSWERED,
    FIRST_SYNC_BACKOFF,
    MAX_BACKOFF,
    Informer,
)
from extender.cluster.watch_filter import PodWatchFilter
from tests.harness.kubecalls import KubeCalls


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status = status


Script = list[dict[str, Any] | BaseException]


class ScriptedWatcher(KubeCalls):
    """Each watch() call plays the next script: events, then an exception or a clean end."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.calls: list[str] = []
        self.done = asyncio.Event()

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        bookmarks: bool = True,
        opened: Callable[[], None] | None = None,
        sieve: Callable[[bytearray], bool] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        self.calls.append(resource_version)
        if not self.scripts:
            if opened is not None:
                opened()  # the server answered: a quiet, open stream
            self.done.set()
            await asyncio.Event().wait()
        script = self.scripts.pop(0)
        if opened is not None and not (script and isinstance(script[0], BaseException)):
            opened()  # a stream that fails at once never opened
        for item in script:
            if isinstance(item, BaseException):
                raise item
            if sieve is None or sieve(bytearray(orjson.dumps(item))):
                yield item


def pod(rv: str, name: str = "p") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": name, "resourceVersion": rv}}


def bookmark(rv: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": rv}}}


def expired() -> dict[str, Any]:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    return {"type": "ERROR", "object": status}


async def run_until_done(
    scripts: list[Script],
    starts: list[str] | None = None,
    watch_filter: PodWatchFilter | None = None,
) -> tuple[Informer, ScriptedWatcher, list[tuple[str, Any]], list[float]]:
    watcher = ScriptedWatcher(scripts)
    seen: list[tuple[str, Any]] = []
    sleeps: list[float] = []
    versions = list(starts or ["10", "50", "90"])

    async def start() -> str:
        return versions.pop(0)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    informer = Informer(
        "pods",
        "/api/v1/pods",
        watcher,
        start,
        lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
        sleep=sleep,
        rng=random.Random(7),
        watch_filter=watch_filter,
    )
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(watcher.done.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return informer, watcher, seen, sleeps


async def test_events_then_bookmarks_resume_from_the_last_version() -> None:
    scripts: list[Script] = [
        [{"type": "ADDED", "object": pod("11", "a")}, bookmark("20")],
        [{"type": "MODIFIED", "object": pod("21", "a")}],
    ]
    informer, watcher, seen, _ = await run_until_done(scripts)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a")]
    assert watcher.calls == ["10", "20", "21"]  # each new watch from the last version seen
    assert informer.status.events == 2 and informer.status.restarts == {}


async def test_410_lists_again_without_back_off() -> None:
    scripts: list[Script] = [[expired()], [ApiError(410)], []]
    informer, watcher, _, sleeps = await run_until_done(scripts)
    assert watcher.calls[:3] == ["10", "50", "90"]  # a new list after each 410
    assert informer.status.restarts == {"expired": 2}
    assert MAX_BACKOFF not in sleeps


async def test_errors_back_off_under_a_doubling_ceiling_and_recover() -> None:
    failures: list[Script] = [[ApiError(403)] for _ in range(7)]
    scripts: list[Script] = [*failures, [{"type": "ADDED", "object": pod("12", "b")}]]
    informer, watcher, seen, sleeps = await run_until_done(scripts)
    ceilings = [1, 2, 4, 8, 16, 30, 30]  # capped at MAX_BACKOFF
    assert [informer.backoff.ceiling(n) for n in range(1, 8)] == ceilings
    backoffs = sleeps[:7]  # then the pause after the recovered stream ended at once
    assert all(0 <= s <= c for s, c in zip(backoffs, ceilings, strict=True))
    assert len(set(backoffs)) == 7  # drawn (full jitter), not the ceilings in lockstep
    assert watcher.calls == ["10"] * 8 + ["12"]  # resumed from its version, never re-listed
    assert seen == [("ADDED", "b")]
    assert informer.status.restarts == {"error": 7}
    assert informer.status.error is None  # recovered (watching until cancelled)


async def test_a_handler_bug_skips_the_event_not_the_stream() -> None:
    watcher = ScriptedWatcher([[{"type": "ADDED", "object": pod("11", "x")}, bookmark("12")]])

    async def start() -> str:
        return "10"

    def handle(kind: str, obj: Any) -> None:
        raise KeyError("bug")

    informer = Informer("pods", "/api/v1/pods", watcher, start, handle)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(watcher.done.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert watcher.calls == ["10", "12"]


async def test_a_failed_first_list_is_reported_and_retried_by_the_loop() -> None:
    calls = 0

    async def start() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ApiError(403)
        return "77"

    watcher = ScriptedWatcher([])
    informer = Informer("nodes", "/api/v1/nodes", watcher, start, lambda k, o: None)
    await informer.prime(5)
    assert informer.status.error is not None and "403" in informer.status.error
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(watcher.done.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert watcher.calls == ["77"]


async def test_a_quiet_watch_is_up_once_the_server_answered() -> None:
    # A real API server sends nothing on a quiet cluster, not even a BOOKMARK, for about a
    # minute: the watch is up as soon as its request was answered with a stream.
    watcher = ScriptedWatcher([])

    async def start() -> str:
        return "10"

    informer = Informer("pods", "/api/v1/pods", watcher, start, lambda k, o: None)
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(watcher.done.wait(), 10)
    try:
        assert informer.status.watching and informer.status.events == 0
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_watch_resumes_after_the_last_line_its_filter_dropped() -> None:
    watch_filter = PodWatchFilter()
    watch_filter.settle("a")

    def update(rv: str, uid: str) -> dict[str, Any]:
        obj = {"metadata": {"uid": uid, "resourceVersion": rv, "name": uid}}
        return {"type": "MODIFIED", "object": {**obj, "spec": {"nodeName": "n"}}}

    scripts: list[Script] = [[update("11", "b"), update("12", "a"), update("13", "a")]]
    informer, watcher, seen, _ = await run_until_done(scripts, watch_filter=watch_filter)
    assert seen == [("MODIFIED", "b")]  # a's updates were dropped undecoded
    assert watcher.calls == ["10", "13"]  # ...and the next watch starts after them
    assert (informer.status.events, informer.status.dropped) == (1, 2)


class Unreachable(Exception):
    """What the client raises when nothing answers (a refused connection): no status."""


async def first_list_after(
    up_at: float, answered_for: float = 0.0, seed: int = 7
) -> tuple[Informer, float, list[float]]:
    """Run an informer that has never listed against an API server that does not answer
    until `up_at` (simulated seconds), then answers 403 for `answered_for` more seconds
    (one coming up), then lists. (informer, when its first list succeeded, its sleeps)."""
    clock = [0.0]
    sleeps: list[float] = []
    listed: list[float] = []

    async def start() -> str:
        if clock[0] < up_at:
            raise Unreachable("connection refused")
        if clock[0] < up_at + answered_for:
            raise ApiError(403)
        listed.append(clock[0])
        return "1"

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    watcher = ScriptedWatcher([])
    informer = Informer(
        "nodes",
        "/api/v1/nodes",
        watcher,
        start,
        lambda k, o: None,
        sleep=sleep,
        rng=random.Random(seed),
    )
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(watcher.done.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return informer, listed[0], sleeps


@pytest.mark.parametrize("late", [5.0, 20.0, 40.0, 300.0])
async def test_a_service_that_never_listed_learns_the_cluster_within_a_second(late: float) -> None:
    """The API server arriving 5 s, 20 s, 40 s or 5 minutes after the service: before its
    first list the informer retries every 0.5-1 s (jittered), so it lists within a second
    of the server answering. The doubling back-off would have waited up to 30 s."""
    for seed in range(20):
        informer, listed, sleeps = await first_list_after(late, seed=seed)
        assert late <= listed < late + FIRST_SYNC_BACKOFF[1], (seed, listed)
        assert all(FIRST_SYNC_BACKOFF[0] <= s <= FIRST_SYNC_BACKOFF[1] for s in sleeps)
        assert informer.status.synced and informer.status.error is None
    # A refused connection costs the server nothing; the rate stays bounded: 2 a second.
    assert len(sleeps) <= 2 * late + 1


async def test_an_api_server_coming_up_answers_errors_for_a_moment() -> None:
    """Up at 20 s, it answers 403 for 2 s (its RBAC not loaded yet): still listed within a
    second of its answering 200."""
    for seed in range(20):
        _, listed, _ = await first_list_after(20.0, answered_for=2.0, seed=seed)
        assert 22.0 <= listed < 23.0, (seed, listed)


async def test_an_answer_that_stays_an_error_backs_off_as_usual() -> None:
    """403 from the start and for good (a missing permission): after its first
    FIRST_SYNC_ANSWERED answered failures, the waits double up to MAX_BACKOFF."""
    _, listed, sleeps = await first_list_after(0.0, answered_for=600.0)
    fast, slow = sleeps[:FIRST_SYNC_ANSWERED], sleeps[FIRST_SYNC_ANSWERED:]
    assert all(s <= FIRST_SYNC_BACKOFF[1] for s in fast)
    assert max(slow) > 8 and all(s <= MAX_BACKOFF for s in slow)
    assert listed >= 600.0
