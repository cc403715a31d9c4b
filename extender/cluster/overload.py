"""The overload taint writer: puts `decice.io/overloaded=<metric>` on the nodes that
decisions.overload says should carry it, and takes it off the others.

Only the replica holding its own Lease writes. Every change reads the node, keeps every
other taint exactly as it is, and patches `spec.taints` with a JSON patch whose `test` op
holds the node's resourceVersion: a node changed meanwhile (422, or a 409) is read again
and the change retried, a few times at most. Patches are rate-limited; a failure backs the
loop off (doubling up to 8x its interval). It runs in the background on the event loop
with awaits between API calls, never on the verbs' path. In dry-run it logs and counts
what it would change. On start it reconciles (our taint off every node fresh data shows
is not hot, and down to the cap); on a graceful stop, with `removeOnShutdown`, it removes
the taints it put.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.cluster.taints import OverloadCounter, TaintWriter, ours
from extender.decisions.engine import Engine
from extender.decisions.model import NodeName
from extender.decisions.nodes import NodeCache
from extender.decisions.overload import (
    Change,
    OverloadState,
    Watched,
    decide,
    trend_of,
)
from extender.errors.rounds import backoff, check_forever
from extender.policy.settings import Settings

log = logging.getLogger("decice.overload")


def watched_metrics(settings: Settings) -> list[Watched]:
    """The default policy's metrics that taint (overload.metrics, or every one with
    filter.above), with their thresholds."""
    chosen = set(settings.overload.metrics)
    return [
        Watched(m.name, m.filter.above, settings.overload.hysteresis, m.max_age)
        for m in settings.default.metrics
        if m.filter is not None and m.filter.above is not None and (not chosen or m.name in chosen)
    ]


def tainted_nodes(nodes: NodeCache) -> dict[NodeName, str]:
    """node -> the metric of our taint, as the node watch shows the nodes."""
    out: dict[NodeName, str] = {}
    for name in nodes.names():
        info = nodes.get(name)
        taint = ours(info.taints) if info is not None else None
        if taint is not None:
            out[name] = taint["value"]
    return out


class Tainter:
    def __init__(
        self,
        engine: Engine,
        nodes: NodeCache,
        kube: KubeAPI,
        leader: Leadership,
        counter: OverloadCounter,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: the back-off's random source (seeded in tests)."""
        self._engine = engine
        self._rng = rng or random.Random()
        self._nodes = nodes
        self._kube = kube
        self._leader = leader
        self._counter = counter
        self._clock = clock
        self._sleep = sleep
        self.state = OverloadState()
        self._reconciled = False
        self._failures = 0
        self._writer = TaintWriter(kube, counter, clock, instance)
        self.last: list[Change] = []
        """The changes of the last check (for /readyz and tests)."""

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    def tainted(self) -> dict[NodeName, str]:
        return tainted_nodes(self._nodes)

    def delay(self) -> float:
        return backoff(self.settings.prometheus.interval, self._failures, self._rng)

    async def run(self) -> None:
        """Check after every refresh interval, forever; a failure backs off."""
        await check_forever(self.delay, self.check, self._failed, log, "overload", self._sleep)

    def _failed(self) -> None:
        self._failures += 1

    async def check(self) -> list[Change]:
        """One pass: the changes decided (and, as the leader in taint mode, written)."""
        if not self._leader.is_leader:
            self._reconciled = False  # a new leader reconciles again
            return []
        engine, rules = self._engine, self.settings.overload
        now = self._clock()
        watched = watched_metrics(self.settings)
        names = self._nodes.names()
        tainted = self.tainted()
        changes = decide(
            self.state,
            watched,
            engine.snapshot,
            names,
            tainted,
            rules.for_seconds,
            rules.max_tainted_fraction,
            now,
        )
        if not self._reconciled:
            changes = self._reconcile(changes, watched, names, tainted, now)
            self._reconciled = True
        self.last = changes
        failed = False
        for change in changes:
            if not self._leader.is_leader:
                break  # lost the lease: stop at once
            failed |= not await self._writer.apply(change, self.settings.overload)
        self._failures = self._failures + 1 if failed else 0
        return changes

    def _reconcile(
        self,
        changes: list[Change],
        watched: list[Watched],
        names: list[NodeName],
        tainted: Mapping[NodeName, str],
        now: float,
    ) -> list[Change]:
        """At the start of a leadership: our taint off every node whose fresh data shows it
        is not hot (a taint left by a writer that stopped without cleaning up), then down to
        the cap, coolest first. A node without fresh data keeps what it has."""
        out = [c for c in changes if c.action == "taint"]
        keep: list[tuple[float, NodeName]] = []
        for node, metric in tainted.items():
            seen = trend_of(node, watched, self._engine.snapshot, now)
            if seen is not None and seen[0] != "hot":
                reason = f"not hot now ({seen[1]}={seen[2]:.4g}): left by an earlier writer"
                out.append(Change(node, "untaint", metric, seen[2], reason))
            else:
                keep.append((seen[2] if seen is not None else math.inf, node))
        cap = math.floor(self.settings.overload.max_tainted_fraction * len(names))
        keep.sort()
        for value, node in keep[: max(len(keep) - cap, 0)]:
            reason = f"over the cap of {cap} tainted nodes (maxTaintedFraction)"
            out.append(Change(node, "untaint", tainted[node], value, reason))
        return out

    async def remove_all(self) -> int:
        """A graceful stop of the writer (removeOnShutdown): our taint off every node."""
        rules = self.settings.overload
        if not rules.remove_on_shutdown or rules.mode != "taint" or not self._leader.is_leader:
            return 0
        removed = 0
        for node, metric in self.tainted().items():
            change = Change(node, "untaint", metric, None, "the writer stopped (removeOnShutdown)")
            removed += await self._writer.apply(change, rules)
        return removed

    def detail(self) -> dict[str, object]:
        """/readyz: the mode, the taints, the last check's changes."""
        return {
            "mode": self.settings.overload.mode,
            "leading": self._leader.is_leader,
            "tainted": sorted(self.tainted()),
            "lastChanges": [
                {"node": c.node, "action": c.action, "metric": c.metric, "reason": c.reason}
                for c in self.last
            ],
        }
