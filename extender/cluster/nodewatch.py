"""The node watch's list and events: the node cache kept current, and the engine told at
once of a node's new size or addresses, a new or removed node (a fit is never refused)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from extender.decisions.engine import Engine
from extender.decisions.model import NodeInfo, NodeName
from extender.decisions.nodes import NodeCache


def _kept(node: NodeInfo | None) -> tuple[float | None, tuple[str, ...]] | None:
    """What the engine keeps of a node: its size and addresses (None: no such node)."""
    return None if node is None else (node.cpu_cores, node.internal_ips)


def _name_of(doc: Any) -> NodeName | None:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


@dataclass(eq=False)
class NodeEventHandler:
    """The node watch's handler (`__call__`) and its list (`replace`); `changed(now)` is
    called after the engine heard of a change (whether pods turned away fit now)."""

    nodes: NodeCache
    engine: Engine
    _: KW_ONLY
    changed: Callable[[float], None] = lambda now: None
    clock: Callable[[], float] = time.time

    def replace(self, found: Iterable[NodeInfo]) -> None:
        """A full list (the first, or after a `410 Gone`): the cache becomes these nodes."""
        before = {name: _kept(self.nodes.get(name)) for name in self.nodes.names()}
        self.nodes.replace(found)
        after = {name: _kept(self.nodes.get(name)) for name in self.nodes.names()}
        if before != after:
            self._tell([name for name in before if name not in after])

    def __call__(self, event_type: str, doc: Any) -> None:
        name = _name_of(doc)
        before = _kept(self.nodes.get(name)) if name is not None else None
        if not self.nodes.apply(event_type, doc) or name is None:
            return
        after = _kept(self.nodes.get(name))
        if before != after:
            self._tell([name] if after is None else [])

    def _tell(self, removed: list[NodeName]) -> None:
        now = self.clock()
        self.engine.nodes_changed(self.nodes.inventory(), removed, now)
        self.changed(now)
