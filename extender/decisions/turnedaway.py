"""Pods our filter turned away from every node, remembered until metrics let one in: a
metric recovering is no cluster event, so kube-scheduler would wait up to 5 minutes; the
requeue loop (cluster.requeue) touches the pods `recovered` names. Pure.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from extender.decisions.pods import CANDIDATES_KEPT_UP_TO


class NameDigest:
    """A Bloom filter of node names, 4 KiB: a false positive costs one needless retry of the
    pod. Built from `hash()` (salted per process, fine in memory; cached on the strings)."""

    BITS = 1 << 15
    HASHES = 3

    def __init__(self, names: Sequence[str]) -> None:
        self._bits = bytearray(self.BITS // 8)
        for name in names:
            for byte, mask in positions(name):
                self._bits[byte] |= mask

    def has(self, where: Sequence[tuple[int, int]]) -> bool:
        """True when every (byte, mask) of a name's `positions` is set."""
        bits = self._bits
        return all(bits[byte] & mask for byte, mask in where)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.has(positions(name))


def positions(name: str) -> tuple[tuple[int, int], ...]:
    """The (byte, mask) pairs of `name` in a NameDigest."""
    h = hash(name) & 0xFFFF_FFFF_FFFF_FFFF
    bits = NameDigest.BITS - 1
    return tuple(
        ((b := (h >> (20 * i)) & bits) >> 3, 1 << (b & 7)) for i in range(NameDigest.HASHES)
    )


@dataclass(frozen=True, slots=True)
class AllBut:
    """A big filter call (nearly every node) kept as the nodes it left out."""

    absent: frozenset[str]


Candidates = tuple[str, ...] | AllBut | NameDigest


def candidates_of(nodes: Sequence[str], known: AbstractSet[str] | None = None) -> Candidates:
    """The cheapest exact form of a filter call's `nodes`, a digest when none is small.
    `known` (the nodes the table scores) turns a call naming nearly all of them into the few
    it left out, far cheaper than a digest (BENCHMARKS.md, "In-process costs the code
    cites")."""
    if len(nodes) <= CANDIDATES_KEPT_UP_TO:
        return tuple(nodes)
    if known is not None:
        absent = known - set(nodes)
        if len(absent) <= CANDIDATES_KEPT_UP_TO:
            return AllBut(frozenset(absent))
    return NameDigest(nodes)


@dataclass(frozen=True, slots=True)
class TurnedAway:
    uid: str
    namespace: str
    name: str
    candidates: Candidates
    at: float
    needs: float = 0.0
    """Cores of room it needs on a node (headroom.py); 0: turned away whatever its size."""
    until: float | None = None
    """When its wait for room ends (herdGuard.waitForRoom)."""

    def any_passes(
        self,
        passes: Callable[[str], bool],
        passing: Collection[str],
        where: Sequence[tuple[tuple[int, int], ...]],
        room: Callable[[str], float] | None = None,
    ) -> bool:
        """A candidate passes now, with the room it needs; `passing` (and `where`, their
        digest positions) are walked for big calls' candidates."""
        needs, c = self.needs, self.candidates

        def fits(n: str) -> bool:
            return not needs or room is None or room(n) >= needs

        if isinstance(c, tuple):
            return any(passes(n) and fits(n) for n in c)
        if isinstance(c, AllBut):
            return any(n not in c.absent and fits(n) for n in passing)
        return any(c.has(w) for n, w in zip(passing, where, strict=True) if fits(n))


class TurnedAwayPods:
    """uid -> TurnedAway, oldest first; at most `capacity`, each for `keep` seconds."""

    def __init__(self, capacity: int, keep: float) -> None:
        self._items: OrderedDict[str, TurnedAway] = OrderedDict()
        self._capacity = capacity
        self._keep = keep

    def remember(
        self,
        uid: str,
        namespace: str,
        name: str,
        nodes: Sequence[str],
        now: float,
        known: AbstractSet[str] | None = None,
        needs: float = 0.0,
        until: float | None = None,
    ) -> None:
        """Remember a pod turned away from `nodes` (`known`: see `candidates_of`)."""
        if not uid or not nodes:
            return
        candidates = candidates_of(nodes, known)
        self._items.pop(uid, None)
        self._items[uid] = TurnedAway(uid, namespace, name, candidates, now, needs, until)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def forget(self, uid: str) -> None:
        self._items.pop(uid, None)

    def __contains__(self, uid: object) -> bool:
        return uid in self._items

    def __len__(self) -> int:
        return len(self._items)

    def recovered(
        self,
        passes: Callable[[str], bool],
        passing: Collection[str],
        now: float,
        room: Callable[[str], float] | None = None,
        most: float = math.inf,
    ) -> list[TurnedAway]:
        """The pods with a candidate that passes now (`most`: the largest room of any node),
        or whose wait ended, forgotten here; expired ones dropped."""
        while self._items:
            first = next(iter(self._items.values()))
            if now - first.at <= self._keep:
                break
            del self._items[first.uid]
        digests = any(isinstance(p.candidates, NameDigest) for p in self._items.values())
        where = [positions(n) for n in passing] if digests else []
        out = [
            p
            for p in self._items.values()
            if (p.until is not None and now >= p.until)
            or (p.needs <= most and p.any_passes(passes, passing, where, room))
        ]
        for pod in out:
            del self._items[pod.uid]
        return out
