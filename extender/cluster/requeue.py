"""Requeue: kube-scheduler retries a rejected pod when it is updated, so a pod we turned
away that a snapshot now lets in gets `decice.io/metrics-recovered` (UID-guarded, paced)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.turnedaway import TurnedAway
from extender.errors.rounds import Pace
from extender.policy.settings import Settings

log = logging.getLogger("decice.requeue")

ANNOTATION = "decice.io/metrics-recovered"


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def outcome_of(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status == 404:
        return "gone"  # deleted since we turned it away
    if status == 422:
        return "recreated"  # the UID precondition failed: a new pod under the same name
    if status in (401, 403):
        return "forbidden"
    return "error"


class Requeuer:
    def __init__(
        self,
        settings: Settings,
        kube: KubeAPI,
        count: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube = kube
        self._count = count
        self._clock = clock
        self._capacity = settings.requeue.max_pods
        self._per_second = settings.requeue.patches_per_second
        self._pending: OrderedDict[str, tuple[TurnedAway, float]] = OrderedDict()
        self._wake = asyncio.Event()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def recovered(self, pods: list[TurnedAway], snapshot_time: float) -> None:
        """Queue these pods for a patch; the oldest wait is dropped when full."""
        for pod in pods:
            self._pending[pod.uid] = (pod, snapshot_time)
            if len(self._pending) > self._capacity:
                self._pending.popitem(last=False)
                self._count("dropped")
        if self._pending:
            self._wake.set()

    def forget(self, uid: str) -> None:
        """The watch saw the pod bound or deleted: it needs no nudge."""
        if self._pending.pop(uid, None) is not None:
            self._count("skipped")

    async def run(self) -> None:
        """Patch the queued pods forever, the oldest first, `patchesPerSecond` at most."""
        pace = Pace()
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            await pace.turn(self._per_second)
            if self._pending:  # a pod the watch saw bound meanwhile was forgotten
                _, (pod, at) = self._pending.popitem(last=False)
                await self._patch(pod, at)

    async def _patch(self, pod: TurnedAway, snapshot_time: float) -> None:
        who = f"{pod.namespace}/{pod.name} ({pod.uid})"
        try:
            await self._kube.annotate_pod(
                pod.namespace, pod.name, pod.uid, {ANNOTATION: _stamp(snapshot_time)}
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome = outcome_of(exc)
            self._count(outcome)
            log.warning("requeue of pod %s not patched (%s): %s", who, outcome, exc)
            return
        self._count("patched")
        waited = self._clock() - pod.at
        log.info("requeue: pod %s patched, %.0f s after it was turned away", who, waited)
