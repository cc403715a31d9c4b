"""Which nodes a pod may go to at all, whatever its scores: its nodeSelector and the
node's NoSchedule / NoExecute taints it does not tolerate (the scheduler's NodeAffinity
nodeSelector part and TaintToleration filters), read from the v1.Pod. Pure.

Not modelled here: node affinity expressions, pod (anti-)affinity, topology spread,
volume and port constraints; a node they would exclude still counts as a candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.decisions.model import NodeInfo, Taint
from extender.decisions.nodes import SCHEDULING_EFFECTS


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 Toleration.ToleratesTaint: an empty effect matches every effect, an empty
        key with Exists every key; Equal (the default) compares the values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Eligibility:
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]

    def allows(self, node: NodeInfo | None) -> bool:
        """The pod may go there (a node we know nothing of: it may)."""
        if node is None:
            return True
        if self.node_selector:
            labels = node.label_map
            if any(labels.get(k) != v for k, v in self.node_selector.items()):
                return False
        return all(
            any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
            if taint.effect in SCHEDULING_EFFECTS
        )


ANYWHERE = Eligibility({}, ())


def read_eligibility(pod: Any) -> Eligibility:
    """The pod's nodeSelector and tolerations (malformed entries are left out)."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(spec, dict):
        return ANYWHERE
    selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations")
    return Eligibility(
        node_selector={str(k): str(v) for k, v in selector.items()}
        if isinstance(selector, dict)
        else {},
        tolerations=tuple(
            Toleration(
                str(t.get("key") or ""),
                str(t.get("operator") or ""),
                str(t.get("value") or ""),
                str(t.get("effect") or ""),
            )
            for t in tolerations or ()
            if isinstance(t, dict)
        )
        if isinstance(tolerations, list)
        else (),
    )
