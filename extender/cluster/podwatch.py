"""What the service does with each pod watch event, O(1) on the event loop: a pod recently
assigned (by any binder) or nominated (`status.nominatedNodeName`) is counted there by the
herd guard, once per UID; a held pod resized in place counts at its new request; a pod
deleted or finished releases its room and is no longer one to requeue; a pod of ours
another binder bound gets its decision's node and `Placed` Event. Its watch filter
(cluster.watch_filter) drops the events that would change none of this, undecoded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from extender.cluster.watch_filter import PodWatchFilter
from extender.decisions.assignments import (
    CLOCK_SKEW,
    Assigned,
    AssignmentLog,
    Nominated,
    Released,
    Waiting,
    is_recent,
    pod_change,
)
from extender.decisions.engine import Engine
from extender.decisions.pods import PodFacts
from extender.decisions.state import NOMINATED


class PodEventHandler:
    def __init__(
        self,
        engine: Engine,
        *,
        forget: Callable[[str], None] = lambda uid: None,
        placed: Callable[[str], None] = lambda uid: None,
        binding: Callable[[str], bool] = lambda uid: False,
        seen: Callable[[Assigned, Any, float], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`seen(assignment, pod, now)`: each recent assignment before the herd guard counts
        it (shadow mode judges it)."""
        self._engine = engine
        self._forget = forget
        self._placed = placed
        self._binding = binding
        self._seen = seen
        self._clock = clock
        self.watch_filter = PodWatchFilter()  # for the pod watch
        engine.nominations = self.watch_filter.nominate  # /preempt nominates pods too
        self._nominated: set[str] = set()  # shown nominated, not since bound or cleared
        # A UID counted once within the span in which it can count at all.
        self._counted = AssignmentLog(keep=2 * (engine.guard.span + CLOCK_SKEW))

    def __call__(self, event_type: str, pod: Any) -> None:
        change = pod_change(event_type, pod)
        if change is None:
            return
        engine = self._engine
        now = self._clock()
        if isinstance(change, Released):
            self._nominated.discard(change.uid)
            engine.release(change.uid, now, change.gone)
            self._drop(change.uid)
            self.watch_filter.forget(change.uid)
        elif isinstance(change, Assigned):
            self._nominated.discard(change.uid)
            self._drop(change.uid)
            self._assigned(change, pod, now)
            # Its later updates change nothing here, but a resize while held.
            self.watch_filter.settle(change.uid)
            held = change.uid in engine.reservations
            self.watch_filter.track(change.uid, _generation(pod) if held else None)
        elif isinstance(change, Nominated):
            engine.nominate(change.uid, change.node, _facts(change, ""), now)
            self._nominated.add(change.uid)
        elif isinstance(change, Waiting) and change.uid in self._nominated:
            # Cleared after the watch showed it set (one /preempt nominated keeps its room:
            # an event without the nomination may be older than it).
            self._nominated.discard(change.uid)
            engine.unnominate(change.uid, now)

    def _drop(self, uid: str) -> None:
        if self._engine.turned_away is not None:
            self._engine.turned_away.forget(uid)
        self._forget(uid)

    def _assigned(self, pod: Assigned, doc: Any, now: float) -> None:
        engine = self._engine
        recent = is_recent(pod, now, engine.guard.span)
        if not recent or not self._counted.first_time(pod.uid, now):
            # Too old, or counted already: a resize of a held pod, or a relist.
            held = engine.reservations.get(pod.uid)
            if held is not None and held.source == NOMINATED:
                engine.unnominate(pod.uid, now)
            elif held is not None:
                engine.resized(pod.uid, _facts(pod, pod.node), now)
            return
        if self._seen is not None:
            self._seen(pod, doc, now)
        facts = _facts(pod, pod.node)
        engine.reserve(
            pod.uid,
            pod.node,
            pod.cores,
            now,
            source="watch",
            pod=facts,
            assigned_at=pod.assigned_at,
        )
        memo = engine.pods.get(pod.uid)
        # Our own bind may still be finishing: its answer and this event race on the loop.
        if memo is not None and not memo.node and not self._binding(pod.uid):
            # Ours, bound by another binder (no bindVerb): record it and tell the pod.
            engine.pods.placed(pod.uid, pod.node)
            self._placed(pod.uid)

    def relisted(self, listed: Collection[str], began: float) -> None:
        """A relist (after a 410) of the pods holding a node: a reservation whose pod it
        lacks goes (its DELETED event was lost), but for one taken after the list `began`
        or whose bind is in flight (the list may predate its Binding)."""
        engine = self._engine
        now = self._clock()
        self.watch_filter.keep_only(listed)
        gone = [
            uid
            for uid, r in engine.reservations.items()
            if uid not in listed and r.bound_at < began and not self._binding(uid)
        ]
        for uid in gone:
            engine.release(uid, now)
            self._drop(uid)


def _facts(pod: Assigned | Nominated, node: str) -> PodFacts:
    """The pod's facts, on `node` ("" for a nominated pod, not bound yet)."""
    return PodFacts(
        pod.uid, pod.name, pod.namespace, "", pod.cores, node, owners=pod.owners, labels=pod.labels
    )


def _generation(pod: Any) -> object:
    """`metadata.generation` as sent (None: an API server that does not track it)."""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    return meta.get("generation") if isinstance(meta, dict) else None
