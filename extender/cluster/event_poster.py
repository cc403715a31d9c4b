"""Events on the pods we place: off the request path, bounded and rate-limited; a full
queue drops the newest, a failed post is counted and never retried.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.explain import explain_nodes, placement_note
from extender.decisions.model import PodEvent
from extender.decisions.pods import PodMemo, PodMemory, name_problem
from extender.errors.rounds import Pace
from extender.policy.settings import Settings

log = logging.getLogger("decice.events")


def placement_event(memo: PodMemo, now: float, instance: str) -> PodEvent:
    """The `Placed` Event for a pod we bound, from its recorded decision."""
    facts = memo.facts
    snapshot = memo.snapshot
    policy = memo.policy
    if snapshot is None or not memo.node or policy is None:
        note = f"placed on {memo.node}"
    else:
        nodes = list(memo.candidates) if memo.candidates is not None else [memo.node]
        rows = explain_nodes(policy, snapshot, memo.stale, memo.herd, nodes, memo.at)
        note = placement_note(
            rows, memo.node, [m.name for m in policy.metrics], memo.asked, len(memo.rejected)
        )
    if memo.expected:
        note = f"{note}; {memo.expected}"[:1024]
    return PodEvent(
        namespace=facts.namespace,
        name=facts.name,
        uid=facts.uid,
        reason="Placed",
        action="Binding",
        note=note,
        time=now,
        instance=instance,
    )


@dataclass(eq=False)
class EventPoster:
    settings: Settings
    pods: PodMemory
    sink: KubeAPI
    count: Callable[[str], None]
    clock: Callable[[], float] = time.time
    instance: str = field(default_factory=socket.gethostname)

    def __post_init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue(maxsize=self.settings.explain.event_queue)

    def placed(self, uid: str) -> None:
        """Queue the Event of a pod we just bound; drop it (counted) when the queue is full."""
        try:
            self._queue.put_nowait(uid)
        except asyncio.QueueFull:
            self.count("dropped")

    async def run(self) -> None:
        """Post the queued Events forever, one per `1 / eventsPerSecond` at most."""
        pace = Pace()
        while True:
            uid = await self._queue.get()
            await pace.turn(self.settings.explain.events_per_second)
            await self._post(uid)

    async def _post(self, uid: str) -> None:
        memo = self.pods.get(uid)
        if memo is None or not memo.node:
            self.count("dropped")  # forgotten meanwhile (memory is bounded)
            return
        facts = memo.facts
        if name_problem(facts.namespace, namespace=True) or name_problem(facts.name):
            self.count("dropped")
            return
        try:
            # Re-scoring the candidates: off the event loop.
            event = await asyncio.to_thread(placement_event, memo, self.clock(), self.instance)
            await self.sink.create_event(event)
        except Exception as exc:
            self.count("failed")
            log.warning("event for pod %s/%s not posted: %s", facts.namespace, facts.name, exc)
            return
        self.count("posted")
