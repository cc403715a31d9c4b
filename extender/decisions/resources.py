"""A pod's CPU request as kube-scheduler counts it, the one rule the filter path, the pod
watch and the API path share, and the CPU quantity grammar. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any


class PodError(ValueError):
    """A v1.Pod that cannot be read; the message names the field."""


# resource.Quantity: a signed decimal, then a binary or decimal SI suffix or an exponent.
_QUANTITY = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?", re.ASCII
)
_SUFFIX = {
    "": Decimal(1),
    **{s: Decimal(10) ** (-3 * i) for i, s in enumerate("mun", 1)},
    **{s: Decimal(10) ** (3 * i) for i, s in enumerate("kMGTPE", 1)},
    **{s: Decimal(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
}


@lru_cache(maxsize=1024)
def cpu_cores(quantity: str) -> float | None:
    """A Kubernetes CPU quantity ("500m", "2", "1.5", "5e-1") in cores; None when malformed,
    negative or beyond a float (never a real request). Not `kubernetes.utils.parse_quantity`:
    that also takes "1 m" and "1_000", and decisions may not import the Kubernetes client."""
    match = _QUANTITY.fullmatch(quantity.strip())
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        scale = _SUFFIX[suffix] if suffix in _SUFFIX else Decimal(10) ** int(suffix[1:])
        value = Decimal(number) * scale
    except (InvalidOperation, ValueError, OverflowError):
        return None
    if value < 0 or not value.is_finite():
        return None
    cores = float(value)
    return cores if math.isfinite(cores) else None


def _cpu_in(resource_list: Any) -> float | None:
    """`cpu` of a ResourceList in cores; None when absent or not a quantity."""
    cpu = resource_list.get("cpu") if isinstance(resource_list, dict) else None
    if isinstance(cpu, bool):
        return None
    if isinstance(cpu, (int, float)):
        cpu = str(cpu)
    return cpu_cores(cpu) if isinstance(cpu, str) else None


def _cpu_of(resources: Any) -> float | None:
    return _cpu_in(resources.get("requests") if isinstance(resources, dict) else None)


def _list(value: Any, where: str = "") -> list[Any]:
    """A list field; malformed: empty, or with `where` a PodError."""
    if where and value is not None and not isinstance(value, list):
        raise PodError(f"{where}: must be a list")
    return value if isinstance(value, list) else []


def _most(*values: float | None) -> float | None:
    """The largest value given, as the API helpers' `max` of ResourceLists."""
    return max((v for v in values if v is not None), default=None)


class _Statuses:
    """What a pod's status says of its containers' resources after in-place resizes
    (KEP-1287): what each runs with and what is allocated to it."""

    def __init__(self, status: Any) -> None:
        status = status if isinstance(status, dict) else {}
        self.by_name = {
            cs["name"]: cs
            for key in ("containerStatuses", "initContainerStatuses")
            for cs in _list(status.get(key))
            if isinstance(cs, dict) and isinstance(cs.get("name"), str)
        }
        # component-helpers `IsPodResizeInfeasible`.
        pending = [
            c
            for c in _list(status.get("conditions"))
            if isinstance(c, dict) and c.get("type") == "PodResizePending"
        ]
        self.infeasible = bool(pending) and pending[0].get("reason") == "Infeasible"

    def cpu(self, container: Any) -> float | None:
        """component-helpers `determineContainerReqs` (an Infeasible resize: what runs)."""
        if not isinstance(container, dict):
            return None
        asked = _cpu_of(container.get("resources"))
        name = container.get("name")
        cs = self.by_name.get(name) if isinstance(name, str) else None
        if cs is None or not isinstance(cs.get("resources"), dict):
            return asked  # the kubelet reported no resources for it: the spec counts
        running = _cpu_of(cs["resources"])
        allocated = _cpu_in(cs.get("allocatedResources"))
        if self.infeasible:
            return _most(running, allocated)
        return _most(asked, running, allocated)


def cpu_request(
    spec: Mapping[str, Any], where: str = "spec", *, status: Any = None
) -> float | None:
    """The pod's effective CPU request in cores: the containers' sum, at least the largest
    init container (sidecars run beside the ones after them), pod-level requests in their
    place when set (KEP-2837), plus `overhead`; with `status`, what in-place resizes left
    each container. None when no part names a CPU request.

    Upstream: kubernetes staging/src/k8s.io/component-helpers/resource/helpers.go
    (PodRequests, AggregateContainerRequests, determineContainerReqs)."""
    statuses, seen, total = _Statuses(status), False, 0.0
    for c in _list(spec.get("containers"), f"{where}.containers"):
        cpu = statuses.cpu(c)
        if cpu is not None:
            seen = True
            total += cpu
    sidecars = init_peak = 0.0
    for c in _list(spec.get("initContainers"), f"{where}.initContainers"):
        if not isinstance(c, dict):
            continue  # no request: it cannot raise the peak
        sidecar = c.get("restartPolicy") == "Always"
        # Only sidecars keep running, so only their resizes count.
        cpu = statuses.cpu(c) if sidecar else _cpu_of(c.get("resources"))
        if cpu is not None:
            seen = True
        amount = cpu or 0.0
        if sidecar:
            total += amount
            sidecars += amount
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, amount + sidecars)
    total = max(total, init_peak)
    if (pod_level := _cpu_of(spec.get("resources"))) is not None:
        seen, total = True, pod_level
    if (extra_cores := _cpu_in(spec.get("overhead"))) is not None:
        seen, total = True, total + extra_cores
    return total if seen else None
