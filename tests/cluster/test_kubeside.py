"""extender.cluster.kubeside: binds, pod reads and Events through the Kubernetes-side
process (the real `python -m extender.cli.kubeworker`, against the loopback API server):
the client's answers and errors come back as the client raised them, a child killed
mid-call leaves the call's outcome unknown (the binder keeps its reservation), calls are
refused while it is down, and the supervisor starts it again. The wire format's frames
are checked apart."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from extender.cluster.binder import Binder
from extender.cluster.client.errors import KubeAlreadyBound, KubeError, KubeUnavailable
from extender.cluster.kubeside import KubeSide, worker_argv
from extender.cluster.kubewire import (
    HEADER,
    VERSION,
    WireProblem,
    error_fields,
    error_of,
    frame,
    length,
    message,
)
from extender.decisions.engine import Engine
from extender.decisions.model import PodEvent
from extender.decisions.wire import BindingArgs, parse_extender_args
from tests.harness.fixtures import NOW, fixture_json, make_settings, make_snapshot
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import wait_until_async

NS = "decice"
TOKEN = "kubeside-token"
UID = "9e764942-ad6e-420d-b0b4-8a8d15daa8fb"  # the captured pod's


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(token=TOKEN) as server:
        server.add_node("node-1", "10.0.0.1", cpu="4")
        server.add_node("node-2", "10.0.0.2", cpu="4")
        for i in range(4):
            server.add_pod(NS, f"p{i}", f"uid-{i}")
        yield server


def side_for(api: FakeKubeAPI, tmp_path: Path, restart: asyncio.Event | None = None) -> KubeSide:
    """The side for `api`; with `restart`, a restart waits until the test sets it."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, TOKEN)

    async def wait(seconds: float) -> None:
        if restart is not None:
            await restart.wait()

    return KubeSide(worker_argv(str(kubeconfig), timeout=5, retries=0), sleep=wait)


async def running(side: KubeSide) -> asyncio.Task[None]:
    task = asyncio.create_task(side.run())
    await asyncio.wait_for(side.up.wait(), 60)
    return task


async def stop(side: KubeSide, task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await side.close()


def test_frames_carry_their_version_and_errors_come_back_as_raised() -> None:
    data = frame({"id": 3, "op": "bind", "args": ["ns", "p", "u", "n"]})
    assert length(data[:HEADER]) == len(data) - HEADER
    assert message(data[HEADER:]) == {
        "v": VERSION,
        "id": 3,
        "op": "bind",
        "args": ["ns", "p", "u", "n"],
    }
    with pytest.raises(WireProblem, match="version 2"):
        message(b'{"v": 2, "id": 1}')
    with pytest.raises(WireProblem, match="over"):
        length((1 << 30).to_bytes(4, "big"))
    bound = error_of(error_fields(KubeAlreadyBound("taken", node="node-2")))
    assert isinstance(bound, KubeAlreadyBound) and (bound.node, bound.status) == ("node-2", 409)
    gone = error_of(error_fields(KubeError("not found", status=404, reason="NotFound")))
    assert (type(gone), gone.status, gone.reason) == (KubeError, 404, "NotFound")
    slow = error_of(error_fields(KubeUnavailable("timeout", reason="Timeout")))
    assert isinstance(slow, KubeUnavailable) and slow.status is None


def test_a_frame_costs_microseconds() -> None:
    # Not a timing assertion: the figure is printed for BENCHMARKS.md; the loop is bounded.
    call = {"id": 1, "op": "bind", "args": ["decice", "pod-00001", "uid" * 12, "node-1"]}
    began = time.perf_counter()
    for i in range(2000):
        call["id"] = i
        data = frame(call)
        message(data[HEADER:])
    print(f"encode + decode a bind frame: {(time.perf_counter() - began) / 2000 * 1e6:.1f} us")


async def test_binds_reads_and_events_go_through_the_child(
    api: FakeKubeAPI, tmp_path: Path
) -> None:
    side = side_for(api, tmp_path)
    task = await running(side)
    try:
        assert await side.bind(NS, "p0", "uid-0", "node-1") == "bound"
        assert await side.bind(NS, "p0", "uid-0", "node-1") == "already-bound"
        with pytest.raises(KubeAlreadyBound) as other:
            await side.bind(NS, "p0", "uid-0", "node-2")
        assert other.value.node == "node-1"
        with pytest.raises(KubeError) as recreated:
            await side.bind(NS, "p1", "not-its-uid", "node-1")
        assert recreated.value.status == 409 and not isinstance(recreated.value, KubeAlreadyBound)
        facts = await side.get_pod(NS, "p0")
        assert (facts.uid, facts.node_name) == ("uid-0", "node-1")
        await side.create_event(
            PodEvent(NS, "p0", "uid-0", "Placed", "Binding", "placed on node-1", 1e9, "x")
        )
        assert any(e["reason"] == "Placed" for e in api.events)
        assert api.bind_count(NS, "p0") == 1
    finally:
        await stop(side, task)


async def test_a_killed_child_leaves_its_calls_unknown_refuses_binds_and_comes_back(
    api: FakeKubeAPI, tmp_path: Path
) -> None:
    api.add_pod(NS, "with-requests", UID, cpu_request="500m")
    restart = asyncio.Event()
    side = side_for(api, tmp_path, restart)
    task = await running(side)
    settings = make_settings()
    engine = Engine(settings, make_snapshot({"cpu": {"node-1": 0.2, "node-2": 0.3}}), NOW)
    data = fixture_json("filter-nodecache.json")  # the captured pod: our filter saw it
    data["NodeNames"] = ["node-1", "node-2"]
    engine.filter(parse_extender_args(orjson.dumps(data)), NOW)
    binder = Binder(settings, engine, side, clock=lambda: NOW)
    ours = BindingArgs("with-requests", NS, UID, "node-1")
    try:
        # The Binding is made, but its answer is held; the child dies before it comes.
        api.delay_next(30, after=True)
        bind = asyncio.create_task(binder.bind(ours))
        await wait_until_async(lambda: api.bind_count(NS, "with-requests") == 1, 30, "bound")
        pid = side.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        error = await asyncio.wait_for(bind, 30)
        assert "whether it reached the API server is unknown" in error
        assert UID in engine.reservations  # it may have bound: counted (the safe side)
        api.release_delays()
        # Down (its restart held): refused before anything is reserved, with the reason.
        assert "exited with code -9" in (side.unavailable() or "")
        refused = await binder.bind(BindingArgs("p3", NS, "uid-3", "node-1"))
        assert "Kubernetes-side process is down" in refused
        assert "uid-3" not in engine.reservations
        restart.set()
        await asyncio.wait_for(side.up.wait(), 60)
        assert side.starts == 2 and side.pid != pid
        # The scheduler's retry reads as already bound: one Binding in all.
        assert await binder.bind(ours) == ""
        assert api.bind_count(NS, "with-requests") == 1
        assert await side.bind(NS, "p3", "uid-3", "node-2") == "bound"
    finally:
        api.release_delays()
        await stop(side, task)
