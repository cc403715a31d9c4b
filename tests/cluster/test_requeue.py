"""extender.cluster.requeue: rate-limited, UID-guarded patches of recovered pods, and the outcome
of each answer the API server gives (a scripted annotator; end to end in test_watch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from extender.cluster.requeue import ANNOTATION, Requeuer
from extender.decisions.turnedaway import TurnedAway
from tests.harness.fixtures import NOW, make_settings
from tests.harness.kubecalls import KubeCalls
from tests.harness.loopback import wait_until_async


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"Kubernetes API {status}")
        self.status = status


class Annotator(KubeCalls):
    def __init__(self, answers: dict[str, int] | None = None) -> None:
        self.answers = answers or {}
        self.patches: list[tuple[str, str, str, dict[str, str | None]]] = []

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
    ) -> None:
        self.patches.append((namespace, name, uid, dict(annotations)))
        if name in self.answers:
            raise ApiError(self.answers[name])


def away(name: str) -> TurnedAway:
    return TurnedAway(f"uid-{name}", "ns", name, ("n1",), NOW)


async def run(requeuer: Requeuer, until: Callable[[], object]) -> None:
    task = asyncio.create_task(requeuer.run())
    try:
        await wait_until_async(until, 10, "the patches went out")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_each_recovered_pod_is_patched_once_with_its_uid() -> None:
    kube, outcomes = Annotator({"gone": 404, "new": 422, "nope": 403, "busy": 503}), list[str]()
    requeuer = Requeuer(make_settings(requeue={"patchesPerSecond": 1000}), kube, outcomes.append)
    requeuer.recovered([away(n) for n in ("ok", "gone", "new", "nope", "busy")], NOW)
    await run(requeuer, lambda: len(outcomes) == 5)
    assert outcomes == ["patched", "gone", "recreated", "forbidden", "error"]
    namespace, name, uid, annotations = kube.patches[0]
    assert (namespace, name, uid) == ("ns", "ok", "uid-ok")
    assert annotations == {ANNOTATION: "2027-01-15T08:00:00Z"}  # the snapshot's time
    assert requeuer.pending == 0


async def test_a_pod_seen_bound_meanwhile_is_skipped() -> None:
    kube, outcomes = Annotator(), list[str]()
    requeuer = Requeuer(make_settings(), kube, outcomes.append)
    requeuer.recovered([away("a"), away("b")], NOW)
    requeuer.forget("uid-a")
    await run(requeuer, lambda: "patched" in outcomes)
    assert [p[1] for p in kube.patches] == ["b"]
    assert outcomes == ["skipped", "patched"]


async def test_patches_are_rate_limited_and_the_queue_is_bounded() -> None:
    kube, outcomes = Annotator(), list[str]()
    settings = make_settings(requeue={"patchesPerSecond": 20, "maxPods": 3})
    requeuer = Requeuer(settings, kube, outcomes.append)
    requeuer.recovered([away(f"p{i}") for i in range(5)], NOW)
    assert outcomes == ["dropped", "dropped"] and requeuer.pending == 3
    loop = asyncio.get_running_loop()
    started = loop.time()
    await run(requeuer, lambda: len(kube.patches) == 3)
    # Three patches at 20/s: the third cannot leave before two intervals passed.
    assert loop.time() - started >= 2 / 20
    assert [p[1] for p in kube.patches] == ["p2", "p3", "p4"]  # the oldest were dropped
