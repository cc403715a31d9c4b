"""The herd guard's ledger: pods counted on their node until fresh metrics include them.

A burst places pods faster than Prometheus can show their load, so every placed pod
reserves its CPU request on its node (as a share of the node's cores) until a snapshot
taken `settle` seconds after it covers it. The ledger keeps the reservations and, kept
incrementally, the load they add per node. Pure: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import Reservation, herd_load, live_reservations
from extender.policy.sections import HerdGuardSettings


class HerdLedger:
    """Reservations by pod UID and the utilisation they add by node."""

    def __init__(self, guard: HerdGuardSettings, guarded: bool) -> None:
        self._guard = guard
        self._guarded = guarded
        self._reservations: dict[str, Reservation] = {}
        self._load: dict[NodeName, float] = {}
        """node -> utilisation the reservations add (herd_load, kept incrementally)."""
        self._node_cores: Mapping[NodeName, float] = {}

    def configure(self, guard: HerdGuardSettings, guarded: bool) -> None:
        """New herd guard settings (a reload); `guarded`: some policy has a herd metric."""
        self._guard = guard
        self._guarded = guarded

    @property
    def reservations(self) -> Mapping[str, Reservation]:
        return self._reservations

    @property
    def load(self) -> Mapping[NodeName, float]:
        """The live per-node load (not a copy: read it, do not keep it)."""
        return self._load

    def set_node_cores(self, cores: Mapping[NodeName, float]) -> None:
        if cores != self._node_cores:
            self._node_cores = cores
            self._recount()

    def reserve(
        self, uid: str, node: NodeName, cores: float | None, now: float, source: str
    ) -> bool:
        """Count a placed pod on `node`; False when the guard is off or it counts already."""
        if not self._guarded or uid in self._reservations:
            return False
        amount = cores if cores is not None else self._guard.default_cpu_request
        reservation = Reservation(uid, node, amount, now, source)
        self._reservations[uid] = reservation
        self._load[node] = self._load.get(node, 0.0) + self._share(reservation)
        return True

    def release(self, uid: str) -> NodeName | None:
        """The pod was deleted or finished: its node (whose load dropped), or None."""
        reservation = self._reservations.pop(uid, None)
        if reservation is None:
            return None
        left = self._load.get(reservation.node, 0.0) - self._share(reservation)
        if left > 1e-9:
            self._load[reservation.node] = left
        else:
            self._load.pop(reservation.node, None)
        return reservation.node

    def load_after(self, node: NodeName, leaving: Iterable[str], arriving: float | None) -> float:
        """The load on `node` once the pods `leaving` (UIDs) are gone and a pod requesting
        `arriving` cores is there: a preemption's view of its candidate node."""
        load = self._load.get(node, 0.0)
        if not self._guarded:
            return load
        for uid in leaving:
            reservation = self._reservations.get(uid)
            if reservation is not None and reservation.node == node:
                load -= self._share(reservation)
        cores = arriving if arriving is not None else self._guard.default_cpu_request
        load += cores / (self._node_cores.get(node) or self._guard.default_node_cores)
        return max(load, 0.0)

    def expire(self, snapshot: Snapshot, metrics: Collection[str]) -> None:
        """Drop the reservations `snapshot` covers (its `metrics` fetched after they settled)."""
        live = live_reservations(
            self._reservations.values(), snapshot, frozenset(metrics), self._guard.settle
        )
        self._reservations = {r.uid: r for r in live}
        self._recount()

    def _recount(self) -> None:
        """The load from scratch: once per refresh (reservations expire, cores change);
        reserve and release keep it up to date in between, O(1) each."""
        self._load = (
            herd_load(self._reservations.values(), self._node_cores, self._guard.default_node_cores)
            if self._guarded
            else {}
        )

    def _share(self, reservation: Reservation) -> float:
        default = self._guard.default_node_cores
        return reservation.cores / (self._node_cores.get(reservation.node) or default)
