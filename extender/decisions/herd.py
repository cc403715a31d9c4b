"""The herd guard's ledger: an assumed-pods cache, pods placed counted on their node until
the metric shows them, as kube-scheduler (`assumedPods`, `pkg/scheduler/backend/cache`),
scheduler-plugins' Trimaran (`ScheduledPodsCache`, `pkg/trimaran/handler.go`) and
koordinator's LoadAware (`pkg/scheduler/plugins/loadaware/pod_assign_cache.go`) keep one.
Here a pod counts at its expected use (estimate.py), or its own measured use once
Prometheus has it, as a share of its node's cores. A rate over a window W shows a pod that
ran t seconds by t / W, and the newest sample is up to `settle` old, so a reservation is
whole until `settle` after the bind, then fades over the window (`unshown_share`). A
departure credits its node the same way with what the metric showed of the pod (nothing
when unknown or on a saturated node), so waiting pods and the rebalancer see the room when
it is there; the credit ends early, never late. Pure: `now` and the snapshot are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from extender.decisions.estimate import usage_fresh
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.usage import EMPTY, UsageTable
from extender.policy.sections import HerdGuardSettings


@dataclass(frozen=True, slots=True)
class Reservation:
    """A placed pod, counted on its node until the metric shows it."""

    uid: str
    node: NodeName
    cores: float  # its expected use when placed (estimate.expected_use)
    bound_at: float
    source: str = "bind"
    """"bind" (ours), "watch" (seen assigned), "nominated" or "expected" (not bound yet:
    held.HeldPods.nominate / expect), "left" (a departure)."""
    basis: str = ""  # why `cores`: "p90 of 12 pods of deployment shop/web"
    pod: tuple[str, str] | None = None
    """(namespace, name): its own measured use, once Prometheus has it, replaces `cores`."""


def departure(uid: str, node: NodeName, cores: float, left_at: float) -> Reservation:
    """A pod gone from `node` whose `cores` the metric still shows: a negative reservation."""
    return Reservation(uid, node, -cores, left_at, "left")


def unshown_share(bound_at: float, data_at: float | None, settle: float, window: float) -> float:
    """The share of a pod placed at `bound_at` a metric fetched at `data_at` does not show:
    1 until `settle` after, then falling over `window` to 0."""
    if data_at is None:
        return 1.0
    ran = data_at - settle - bound_at
    if ran < 0:
        return 1.0
    if window <= 0:
        return 0.0
    return max(0.0, 1.0 - ran / window)


def data_time(snapshot: Snapshot, metrics: Iterable[str]) -> float | None:
    """When the herd metrics were last fetched, the oldest (None: one never was)."""
    oldest = math.inf
    for name in metrics:
        series = snapshot.metrics.get(name)
        at = series.fetched_at if series is not None else None
        if at is None:
            return None
        oldest = min(oldest, at)
    return None if oldest == math.inf else oldest


class HerdLedger:
    """The assumed pods: reservations by pod UID and the utilisation they add by node."""

    def __init__(self, guard: HerdGuardSettings, guarded: bool, window: float = 0.0) -> None:
        self._guard = guard
        self._guarded = guarded
        self._window = window
        self.reservations: dict[str, Reservation] = {}
        self._departures: dict[str, Reservation] = {}
        self.margins: Mapping[NodeName, float] = {}  # node -> its swings' margin (peaks.py)
        self._charged: dict[str, float] = {}  # uid -> the share of its node's cores it adds
        self.load: dict[NodeName, float] = {}  # node -> `_charged` and margins summed (live)
        self.node_cores: Mapping[NodeName, float] = {}
        self._sizes_watched = False
        self._data_at: float | None = None
        self._usage: UsageTable = EMPTY

    def configure(self, guard: HerdGuardSettings, guarded: bool, window: float) -> None:
        """New herd guard settings (a reload); `guarded`: some policy has a herd metric."""
        self._guard = guard
        self._guarded = guarded
        self._window = window
        self._recount()

    def set_node_cores(self, cores: Mapping[NodeName, float]) -> None:
        if cores != self.node_cores:
            self.node_cores = cores
            self._recount()

    def watch_sizes(self) -> None:
        """Node sizes come from a node watch: a node it has not told of counts nothing (no
        veto on a guessed size; herdGuard.defaultNodeCores is for no watch)."""
        if not self._sizes_watched:
            self._sizes_watched = True
            self._recount()

    def reserve(self, reservation: Reservation) -> bool:
        """Count a placed pod on its node; False when the guard is off or it counts already."""
        if not self._guarded or reservation.uid in self.reservations:
            return False
        self.reservations[reservation.uid] = reservation
        self._add(reservation)
        return True

    def release(
        self, uid: str, gone: tuple[NodeName, float | None, float] | None = None
    ) -> NodeName | None:
        """The pod was deleted or finished: its node (whose load dropped), or None.
        `gone`: (node, cores the metric shows of it or None, when), to credit its node."""
        node = None
        reservation = self.reservations.pop(uid, None)
        if reservation is not None:
            node = reservation.node
            self._change(node, -self._charged.pop(uid))
        if gone is None or not self._guarded or uid in self._departures:
            return node
        where, measured, left_at = gone
        if reservation is not None:  # what the metric shows of it: its use less the unshown
            reserved = self._cores(reservation, self._usage)
            unshown = unshown_share(reservation.bound_at, left_at, self._guard.settle, self._window)
            measured = reserved * (1.0 - unshown)
        if measured is None or measured <= 0 or not where:
            return node
        self._departures[uid] = gone_pod = departure(uid, where, measured, left_at)
        self._add(gone_pod)
        return where

    def _change(self, node: NodeName, by: float) -> None:
        left = self.load.get(node, 0.0) + by
        if abs(left) > 1e-9:
            self.load[node] = left
        else:
            self.load.pop(node, None)

    def in_flight(self) -> dict[NodeName, float]:
        """node -> the load of our pods counted and not yet shown (`load` without the margins):
        the nodes whose spread waits (peaks.py)."""
        out = {}
        for node, load in self.load.items():
            pods = load - self.margins.get(node, 0.0)
            if abs(pods) > 1e-9:
                out[node] = pods
        return out

    def load_after(self, node: NodeName, leaving: Iterable[str], arriving: float) -> float:
        """The load on `node` with the `leaving` UIDs gone and `arriving` cores come
        (a preemption's view)."""
        load = self.load.get(node, 0.0)
        if not self._guarded:
            return load
        for uid in leaving:
            reservation = self.reservations.get(uid)
            if reservation is not None and reservation.node == node:
                load -= self._charged[uid]
        load += arriving / self.cores_of(node)
        return max(load, 0.0)

    def drop_node(self, node: NodeName) -> list[str]:
        """The node is gone (scaled down): its reservations go with it; their UIDs."""
        gone = [uid for uid, r in self.reservations.items() if r.node == node]
        for uid in gone:
            self.release(uid)
        for uid in [u for u, d in self._departures.items() if d.node == node]:
            del self._departures[uid]
            del self._charged[uid]
        self.load.pop(node, None)
        return gone

    def install(self, snapshot: Snapshot, metrics: Collection[str]) -> None:
        """A new snapshot: reservations charged at what it does not show yet (the margins
        go until `set_margins`)."""
        self._data_at = data_time(snapshot, metrics) if metrics else math.inf
        self._usage = self._fresh(snapshot)
        self.margins = {}
        self._recount()

    def set_margins(self, margins: Mapping[NodeName, float]) -> None:
        """node -> its recent swings' margin (peaks.py), in `load` until the next install."""
        for node, margin in self.margins.items():
            self._change(node, -margin)
        self.margins = margins if self._guarded else {}
        for node, margin in self.margins.items():
            self._change(node, margin)

    def projected(self, snapshot: Snapshot, metrics: Collection[str]) -> dict[NodeName, float]:
        """The per-node load `install(snapshot, metrics)` would give (tables built off the loop)."""
        data_at = data_time(snapshot, metrics) if metrics else math.inf
        load: dict[NodeName, float] = {}
        for r in (*self.reservations.values(), *self._departures.values()):
            share = self._share(r, data_at, self._fresh(snapshot))
            if share:
                load[r.node] = load.get(r.node, 0.0) + share
        return load

    def _recount(self) -> None:
        """Charges from scratch, once per refresh; reserve and release are O(1) between."""
        self._charged = {}
        self.load = {}
        if not self._guarded:
            self.reservations = {}
            self._departures = {}
            return
        self.reservations = {u: r for u, r in self.reservations.items() if not self._shown(r)}
        self._departures = {u: d for u, d in self._departures.items() if not self._shown(d)}
        for r in (*self.reservations.values(), *self._departures.values()):
            self._add(r)
        for node, margin in self.margins.items():
            self._change(node, margin)

    def _shown(self, r: Reservation) -> bool:
        return unshown_share(r.bound_at, self._data_at, self._guard.settle, self._window) <= 0

    def _add(self, r: Reservation) -> None:
        share = self._share(r, self._data_at, self._usage)
        self._charged[r.uid] = share
        self._change(r.node, share)

    def _share(self, r: Reservation, data_at: float | None, usage: UsageTable) -> float:
        unshown = unshown_share(r.bound_at, data_at, self._guard.settle, self._window)
        if unshown <= 0:
            return 0.0
        return self._cores(r, usage) * unshown / self.cores_of(r.node)

    def _cores(self, r: Reservation, usage: UsageTable) -> float:
        """Its expected use, or its own measured use once Prometheus has it."""
        if r.pod is not None and self._guard.estimate == "usage":
            own = usage.pods.get(r.pod)
            if own is not None:
                return own
        return r.cores

    def _fresh(self, snapshot: Snapshot) -> UsageTable:
        """The snapshot's measured use, or none when it is too old to trust."""
        usage = snapshot.usage
        return usage if usage_fresh(usage, self._guard, snapshot.taken_at) else EMPTY

    def cores_of(self, node: NodeName) -> float:
        """The node's cores; infinite (a share of nothing) if unknown while watched."""
        known = self.node_cores.get(node)
        if known:
            return known
        return math.inf if self._sizes_watched else self._guard.default_node_cores
