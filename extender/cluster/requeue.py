"""Requeue: kube-scheduler retries a rejected pod when it is updated, so a pod we turned
away that a snapshot now lets in gets `decice.io/metrics-recovered` (UID-guarded, paced)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.turnedaway import TurnedAway
from extender.errors.rounds import Pace
from extender.policy.settings import Settings

log = logging.getLogger("decice.requeue")

ANNOTATION = "decice.io/metrics-recovered"


def _stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


OUTCOMES: dict[object, str] = {404: "gone", 422: "recreated", 401: "forbidden", 403: "forbidden"}
"""A failed patch's status -> its outcome (else "error"): 404, deleted since we turned it
away; 422, the UID precondition failed (a new pod under the same name)."""


@dataclass(eq=False)
class Requeuer:
    settings: Settings
    kube: KubeAPI
    count: Callable[[str], None]
    clock: Callable[[], float] = time.time
    _pending: OrderedDict[str, tuple[TurnedAway, float]] = field(
        default_factory=OrderedDict, init=False
    )
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def recovered(self, pods: list[TurnedAway], snapshot_time: float) -> None:
        """Queue these pods for a patch; the oldest wait is dropped when full."""
        for pod in pods:
            self._pending[pod.uid] = (pod, snapshot_time)
            if len(self._pending) > self.settings.requeue.max_pods:
                self._pending.popitem(last=False)
                self.count("dropped")
        if self._pending:
            self._wake.set()

    def forget(self, uid: str) -> None:
        """The watch saw the pod bound or deleted: it needs no nudge."""
        if self._pending.pop(uid, None) is not None:
            self.count("skipped")

    async def run(self) -> None:
        """Patch the queued pods forever, the oldest first, `patchesPerSecond` at most."""
        pace = Pace()
        while True:
            while not self._pending:
                self._wake.clear()
                await self._wake.wait()
            await pace.turn(self.settings.requeue.patches_per_second)
            if self._pending:  # a pod the watch saw bound meanwhile was forgotten
                _, (pod, at) = self._pending.popitem(last=False)
                await self._patch(pod, at)

    async def _patch(self, pod: TurnedAway, snapshot_time: float) -> None:
        who = f"{pod.namespace}/{pod.name} ({pod.uid})"
        try:
            await self.kube.annotate_pod(
                pod.namespace, pod.name, pod.uid, {ANNOTATION: _stamp(snapshot_time)}
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome = OUTCOMES.get(getattr(exc, "status", None), "error")
            self.count(outcome)
            log.warning("requeue of pod %s not patched (%s): %s", who, outcome, exc)
            return
        self.count("patched")
        waited = self.clock() - pod.at
        log.info("requeue: pod %s patched, %.0f s after it was turned away", who, waited)
