"""What a pod asks kube-scheduler to weigh itself: its soft scheduling preferences.

Read from the pod spec our verbs are sent; the shortlist (decisions.shortlist) leaves such
pods every passing node, since those preferences are scored by the scheduler's plugins.
"""

from __future__ import annotations

from typing import Any

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def prefers_nodes(spec: dict[str, Any]) -> bool:
    """The pod spec asks kube-scheduler to weigh nodes: a preferred node affinity or pod
    (anti-)affinity term, or a `ScheduleAnyway` topology spread constraint (scored by the
    NodeAffinity, InterPodAffinity and PodTopologySpread plugins). Not validated: the API
    server did that; anything malformed counts as no preference."""
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind)
            if isinstance(terms, dict) and terms.get(PREFERRED):
                return True
    spread = spec.get("topologySpreadConstraints")
    if isinstance(spread, list):
        return any(
            isinstance(c, dict) and c.get("whenUnsatisfiable") == "ScheduleAnyway" for c in spread
        )
    return False
