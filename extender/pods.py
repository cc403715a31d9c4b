"""What we remember of pods between the scheduler's filter call and its bind call.

The bind request carries only name, namespace, UID and node; the schedulerName, the CPU
request and the nodes our filter rejected come from the filter call for that UID, kept
in a small bounded map (after a restart the bind path GETs the pod instead).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from kubernetes.utils.quantity import parse_quantity

from extender.wire import PodFacts


@lru_cache(maxsize=1024)
def cpu_cores(quantity: str) -> float | None:
    """A Kubernetes CPU quantity ("500m", "2", "1.5") in cores; None when malformed."""
    try:
        return float(parse_quantity(quantity))  # type: ignore[no-untyped-call]
    except (ValueError, ArithmeticError):
        return None


def pod_cpu_request(facts: PodFacts) -> float | None:
    """Effective CPU request: max(sum of containers, largest init container), as kubelet counts."""
    main = [c for q in facts.cpu_requests if (c := cpu_cores(q)) is not None]
    init = [c for q in facts.init_cpu_requests if (c := cpu_cores(q)) is not None]
    if not main and not init:
        return None
    return max(sum(main), max(init, default=0.0))


@dataclass(frozen=True, slots=True)
class PodMemo:
    facts: PodFacts
    cpu_request: float | None
    rejected: frozenset[str]
    """Nodes our latest filter call for this pod rejected."""
    candidates: frozenset[str] | None = None
    """The nodes that call was asked about, kept only for small calls (nominated-node
    retries, node selectors): a 5,000-name set per pod would cost the filter path time and
    the memory tens of MB."""


CANDIDATES_KEPT_UP_TO = 256


class PodMemory:
    """uid -> PodMemo, least recently filtered dropped first."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._items: OrderedDict[str, PodMemo] = OrderedDict()
        self._capacity = capacity

    def remember(self, memo: PodMemo) -> None:
        uid = memo.facts.uid
        if not uid:
            return
        self._items[uid] = memo
        self._items.move_to_end(uid)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, uid: str) -> PodMemo | None:
        return self._items.get(uid)

    def __len__(self) -> int:
        return len(self._items)
