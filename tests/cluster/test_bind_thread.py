"""The bind thread: the binder's API calls run on a thread and loop of their own, results
and errors come back to the verbs' loop, a cancelled caller cancels the call, close ends
it all; and the service binds through it against the loopback API server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from extender.cluster.bind_thread import BindThread
from extender.cluster.client import KubeClient, KubeError
from extender.decisions.pods import PodFacts
from extender.metrics.providers import StaticProvider
from extender.policy.loading import parse_settings
from extender.service.compose import build_service
from tests.harness.kubeapi import FakeKubeAPI, client_for


class Recording:
    """A stand-in client: records the thread and loop of every call."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.closed_on: str | None = None
        self.release = threading.Event()
        self.cancelled = threading.Event()

    def _note(self) -> None:
        self.threads.append(threading.current_thread().name)
        self.loops.append(asyncio.get_running_loop())

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        self._note()
        if name == "refused":
            raise KubeError("pod gone", status=404)
        if name == "slow":
            try:
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return f"bound {namespace}/{name} ({uid}) -> {node}"

    async def get_pod(self, namespace: str, name: str) -> PodFacts:
        self._note()
        return PodFacts("u1", name, namespace, "decice_sched", 0.5)

    async def close(self) -> None:
        self.closed_on = threading.current_thread().name


async def test_calls_run_on_the_thread_and_answer_on_the_callers_loop() -> None:
    client = Recording()
    thread = BindThread(lambda: client)
    assert not thread.running  # started by the first call, not before
    assert await thread.bind("ns", "p", "u1", "node-1") == "bound ns/p (u1) -> node-1"
    facts = await thread.get_pod("ns", "p")
    assert facts.uid == "u1" and facts.cpu_request == 0.5
    assert client.threads == ["decice-bind", "decice-bind"]
    assert asyncio.get_running_loop() not in client.loops and len(set(client.loops)) == 1
    with pytest.raises(KubeError, match="pod gone") as raised:
        await thread.bind("ns", "refused", "u2", "node-1")
    assert raised.value.status == 404
    await thread.close()
    assert client.closed_on == "decice-bind" and not thread.running
    await thread.close()  # idempotent


async def test_concurrent_binds_overlap_on_the_thread() -> None:
    client = Recording()
    thread = BindThread(lambda: client)
    slow = asyncio.create_task(thread.bind("ns", "slow", "u1", "node-1"))
    # a second bind answers while the first still waits for its API answer
    assert await thread.bind("ns", "quick", "u2", "node-2") == "bound ns/quick (u2) -> node-2"
    assert not slow.done()
    client.release.set()
    assert (await slow).startswith("bound ns/slow")
    await thread.close()


async def test_a_cancelled_caller_cancels_the_call_on_the_thread() -> None:
    client = Recording()
    thread = BindThread(lambda: client)
    slow = asyncio.create_task(thread.bind("ns", "slow", "u1", "node-1"))
    while not client.threads:  # the call reached the thread
        await asyncio.sleep(0.01)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert await asyncio.to_thread(client.cancelled.wait, 5)
    await thread.close()


async def test_close_without_a_call_starts_nothing() -> None:
    made: list[Recording] = []

    def make() -> Recording:
        made.append(Recording())
        return made[-1]

    thread = BindThread(make)
    await thread.close()
    assert made == [] and not thread.running


def settings() -> Any:
    return parse_settings(
        {
            "provider": "static",
            "static": {"nodes": {"node-1": {"cpu": 0.2}}},
            "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
            "bind": {"enabled": True},
            "explain": {"events": False},
            "kubernetes": {"watchPods": False},
        }
    )


async def test_the_service_binds_through_the_thread() -> None:
    """A real KubeClient: the binder gets its twin on the bind thread; the pod is bound
    once on the server, and the lifespan's end stops the thread."""
    with FakeKubeAPI() as api:
        api.add_node("node-1", "10.0.0.1", cpu="4")
        api.add_pod("default", "web", "uid-web", "decice_sched")
        kube = KubeClient(client_for(api), timeout=2, retries=0)
        s = settings()
        service = build_service(s, provider=StaticProvider({"node-1": {"cpu": 0.2}}), kube=kube)
        transport = httpx.ASGITransport(app=service.app)
        async with (
            service.app.router.lifespan_context(service.app),
            httpx.AsyncClient(transport=transport, base_url="http://t") as client,
        ):
            body = {"PodName": "web", "PodNamespace": "default", "PodUID": "uid-web",
                    "Node": "node-1"}  # fmt: skip
            answer = (await client.post("/bind", json=body)).json()
            assert answer == {"Error": ""}
            names = {t.name for t in threading.enumerate()}
            assert "decice-bind" in names
        assert api.bind_count("default", "web") == 1
        assert "decice-bind" not in {t.name for t in threading.enumerate()}
        await kube.close()


async def test_a_stand_in_client_is_used_as_given() -> None:
    """Tests that pass their own client object (no KubeClient) keep calling it directly."""
    client = Recording()
    s = settings()
    provider = StaticProvider({"node-1": {"cpu": 0.2}})
    service = build_service(s, provider=provider, kube=client)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        body = {"PodName": "web", "PodNamespace": "default", "PodUID": "u1", "Node": "node-1"}
        assert (await http.post("/bind", json=body)).json() == {"Error": ""}
    assert client.threads == [threading.current_thread().name] * 2  # get_pod, then bind
