"""The overload taint writer: `decice.io/overloaded=<metric>` where decisions.overload says,
only while holding the Lease. It reconciles on start and removes its taints on a graceful
stop (`removeOnShutdown`); each change keeps the other taints, is guarded by the node's
resourceVersion (retried on a conflict) and posts a Warning Event on the Node.
"""

from __future__ import annotations

import logging
import math
import random
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.cluster.kubeapi import KubeAPI
from extender.cluster.leader import Leadership
from extender.decisions.engine import Engine
from extender.decisions.model import NodeName, PodEvent
from extender.decisions.nodes import NodeCache
from extender.decisions.overload import TAINT_KEY, Change, OverloadState, Watched, decide, trend_of
from extender.errors.causes import describe
from extender.errors.rounds import Pace, backoff, check_forever
from extender.policy.sections import OverloadSettings
from extender.policy.settings import Settings

log = logging.getLogger("decice.overload")

ATTEMPTS = 3  # reads and patches of one node before a change is given up


@dataclass(eq=False)
class TaintWriter:
    kube: KubeAPI
    count: Callable[[str, str], object]
    clock: Callable[[], float]
    instance: str = field(default_factory=socket.gethostname)
    pace: Pace = field(default_factory=Pace)

    async def apply(self, change: Change, rules: OverloadSettings) -> bool:
        """Write one change (dry-run: log it); False when it failed."""
        if rules.mode == "dry-run":
            log.info(
                "overload (dry-run): would %s %s: %s", change.action, change.node, change.reason
            )
            self.count(change.action, "dry-run")
            return True
        await self.pace.turn(rules.patches_per_second)
        for _ in range(ATTEMPTS):
            try:
                node = await self.kube.get_node(change.node)
                meta, spec = node.get("metadata") or {}, node.get("spec") or {}
                current = [t for t in spec.get("taints") or () if isinstance(t, dict)]
                others = [t for t in current if t.get("key") != TAINT_KEY]
                wanted = others + (
                    [{"key": TAINT_KEY, "value": change.metric, "effect": rules.effect}]
                    if change.action == "taint"
                    else []
                )
                if wanted == current:
                    self.count(change.action, "unchanged")
                    return True
                await self.kube.set_node_taints(
                    change.node, str(meta.get("resourceVersion") or ""), wanted
                )
            except Exception as exc:
                if getattr(exc, "status", None) in (409, 422):
                    log.info("overload: %s changed meanwhile; reading it again", change.node)
                    continue
                log.warning("overload: %s %s failed: %s", change.action, change.node, describe(exc))
                self.count(change.action, "failed")
                return False
            self.count(change.action, "done")
            log.info("overload: %sed %s: %s", change.action, change.node, change.reason)
            await self._event(change, node, rules.effect)
            return True
        log.warning(
            "overload: %s %s: the node kept changing; next check", change.action, change.node
        )
        self.count(change.action, "conflict")
        return False

    async def _event(self, change: Change, node: Mapping[str, Any], effect: str) -> None:
        """A Warning Event on the Node (namespace default), best-effort."""
        if change.action == "taint":
            reason, action = "Overloaded", "Taint"
            note = f"{change.reason}: tainted {TAINT_KEY}={change.metric}:{effect}"
        else:
            reason, action = "OverloadCleared", "Untaint"
            note = f"{change.reason}: {TAINT_KEY} removed"
        meta = node.get("metadata") or {}
        event = PodEvent(
            namespace="default",
            name=change.node,
            uid=str(meta.get("uid") or ""),
            reason=reason,
            action=action,
            note=note,
            time=self.clock(),
            instance=self.instance,
            type="Warning",
            kind="Node",
        )
        try:
            await self.kube.create_event(event)
        except Exception as exc:
            log.info("overload: event on %s not posted: %s", change.node, describe(exc))


def watched_metrics(settings: Settings) -> list[Watched]:
    """The default policy's metrics that taint (overload.metrics, else all with filter.above)."""
    chosen = set(settings.overload.metrics)
    return [
        Watched(m.name, m.filter.above, settings.overload.hysteresis, m.max_age)
        for m in settings.default.metrics
        if m.filter is not None and m.filter.above is not None and (not chosen or m.name in chosen)
    ]


def tainted_nodes(nodes: NodeCache) -> dict[NodeName, str]:
    out: dict[NodeName, str] = {}
    for name in nodes.names():
        info = nodes.get(name)
        for taint in info.taints if info is not None else ():
            if taint.key == TAINT_KEY:
                out[name] = taint.value
    return out


@dataclass(eq=False)
class Tainter:
    engine: Engine
    nodes: NodeCache
    kube: KubeAPI
    leader: Leadership
    count: Callable[[str, str], object]
    clock: Callable[[], float] = time.time
    state: OverloadState = field(default_factory=OverloadState, init=False)
    last: list[Change] = field(default_factory=list, init=False)  # the last check's (/readyz)

    def __post_init__(self) -> None:
        self._writer = TaintWriter(self.kube, self.count, self.clock)
        self._rng = random.Random()
        self._reconciled = False
        self._failures = 0

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    def delay(self) -> float:
        return backoff(self.settings.prometheus.interval, self._failures, self._rng)

    async def run(self) -> None:
        """Check after every refresh interval, forever; a failure backs off."""
        await check_forever(self.delay, self.check, self._failed, log, "overload")

    def _failed(self) -> None:
        self._failures += 1

    async def check(self) -> list[Change]:
        """One pass: the changes decided (and, as the leader in taint mode, written)."""
        if not self.leader.is_leader:
            self._reconciled = False  # a new leader reconciles again
            return []
        engine, rules = self.engine, self.settings.overload
        now = self.clock()
        watched = watched_metrics(self.settings)
        names = self.nodes.names()
        tainted = tainted_nodes(self.nodes)
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
            if not self.leader.is_leader:
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
        """A new leader's: our taint off nodes whose fresh data is not hot, then down to the
        cap, coolest first (never on missing data)."""
        out = [c for c in changes if c.action == "taint"]
        keep: list[tuple[float, NodeName]] = []
        for node, metric in tainted.items():
            seen = trend_of(node, watched, self.engine.snapshot, now)
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
        if not rules.remove_on_shutdown or rules.mode != "taint" or not self.leader.is_leader:
            return 0
        removed = 0
        for node, metric in tainted_nodes(self.nodes).items():
            change = Change(node, "untaint", metric, None, "the writer stopped (removeOnShutdown)")
            removed += await self._writer.apply(change, rules)
        return removed

    def detail(self) -> dict[str, object]:
        """/readyz: the mode, the taints, the last check's changes."""
        return {
            "mode": self.settings.overload.mode,
            "leading": self.leader.is_leader,
            "tainted": sorted(tainted_nodes(self.nodes)),
            "lastChanges": [
                {"node": c.node, "action": c.action, "metric": c.metric, "reason": c.reason}
                for c in self.last
            ],
        }
