"""Writing one overload taint change: read the node, keep every other taint exactly, patch
`spec.taints` guarded by the node's resourceVersion (a JSON patch's `test` op), read again
and retry on a conflict, post a Warning Event on the Node; at a bounded pace."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from extender.cluster.kubeapi import KubeAPI
from extender.decisions.model import PodEvent
from extender.decisions.overload import TAINT_KEY, Change
from extender.errors.causes import describe
from extender.errors.rounds import Pace
from extender.policy.sections import OverloadSettings

log = logging.getLogger("decice.overload")

ATTEMPTS = 3
"""Reads and patches of one node before a change is given up (conflicts with writers)."""


class OverloadCounter(Protocol):
    def overload_changed(self, action: str, outcome: str) -> None: ...


def ours(node_taints: Any) -> dict[str, str] | None:
    """Our taint among a node's taints (as NodeInfo or the API holds them), or None."""
    for taint in node_taints or ():
        key = taint.key if hasattr(taint, "key") else taint.get("key")
        if key == TAINT_KEY:
            value = taint.value if hasattr(taint, "value") else taint.get("value", "")
            return {"value": str(value or "")}
    return None


class TaintWriter:
    def __init__(
        self,
        kube: KubeAPI,
        counter: OverloadCounter,
        clock: Callable[[], float] = time.time,
        instance: str | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self._kube = kube
        self._counter = counter
        self._clock = clock
        self._instance = instance or socket.gethostname()
        self._sleep = sleep
        self._pace = Pace(sleep)

    async def apply(self, change: Change, rules: OverloadSettings) -> bool:
        """Write one change (dry-run: log it); False when it failed."""
        if rules.mode == "dry-run":
            log.info(
                "overload (dry-run): would %s %s: %s", change.action, change.node, change.reason
            )
            self._counter.overload_changed(change.action, "dry-run")
            return True
        await self._pace.turn(rules.patches_per_second)
        for _ in range(ATTEMPTS):
            try:
                node = await self._kube.get_node(change.node)
                meta, spec = node.get("metadata") or {}, node.get("spec") or {}
                current = [t for t in spec.get("taints") or () if isinstance(t, dict)]
                others = [t for t in current if t.get("key") != TAINT_KEY]
                wanted = others + (
                    [{"key": TAINT_KEY, "value": change.metric, "effect": rules.effect}]
                    if change.action == "taint"
                    else []
                )
                if wanted == current:
                    self._counter.overload_changed(change.action, "unchanged")
                    return True
                await self._kube.set_node_taints(
                    change.node, str(meta.get("resourceVersion") or ""), wanted
                )
            except Exception as exc:
                if getattr(exc, "status", None) in (409, 422):
                    log.info("overload: %s changed meanwhile; reading it again", change.node)
                    continue
                log.warning("overload: %s %s failed: %s", change.action, change.node, describe(exc))
                self._counter.overload_changed(change.action, "failed")
                return False
            self._counter.overload_changed(change.action, "done")
            log.info("overload: %sed %s: %s", change.action, change.node, change.reason)
            await self._event(change, node, rules.effect)
            return True
        log.warning(
            "overload: %s %s: the node kept changing; next check", change.action, change.node
        )
        self._counter.overload_changed(change.action, "conflict")
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
            time=self._clock(),
            instance=self._instance,
            type="Warning",
            kind="Node",
        )
        try:
            await self._kube.create_event(event)
        except Exception as exc:
            log.info("overload: event on %s not posted: %s", change.node, describe(exc))
