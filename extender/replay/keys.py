"""The labels a replay tells series apart by, and which the folded series lacked (without
`uid`, kube-state-metrics before v2.1, kubernetes/kube-state-metrics#1304, one pod becomes
two). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

TIMES = ("created", "started", "scheduled", "completed", "deleted")
POD = ("namespace", "pod", "uid")
KEYS: dict[str, tuple[str, ...]] = {
    "allocatable": ("node", "resource"),
    "node_info": ("node", "internal_ip"),
    "taints": ("node",),
    "pod_info": POD,
    **dict.fromkeys(TIMES, POD),
    "requests": (*POD, "resource"),
    "scheduler": (*POD, "name"),
    "selectors": POD,
    "tolerations": POD,
    "owners": ("namespace", "pod", "workload"),
}
"""A window input's key -> the labels its series are told apart by."""


class KeyLabels:
    def __init__(self) -> None:
        self.had: dict[str, set[str]] = {}
        self.lacked: dict[str, set[str]] = {}

    def note(self, key: str, labels: Mapping[str, str]) -> None:
        for label in KEYS[key]:
            into = self.had if labels.get(label) else self.lacked
            into.setdefault(key, set()).add(label)

    def bound(self) -> None:
        """A kube_pod_info series named a node."""
        self.had.setdefault("pod_info", set()).add("node")

    def lacking(self) -> list[tuple[str, str, bool]]:
        """(input key, label, on every series) of each label lacked; `node` when no
        kube_pod_info series had one."""
        out = [
            (key, label, label not in self.had.get(key, set()))
            for key, labels in KEYS.items()
            for label in labels
            if label in self.lacked.get(key, set())
        ]
        folded = "pod_info" in self.lacked or "pod_info" in self.had
        if folded and "node" not in self.had.get("pod_info", set()):
            out.append(("pod_info", "node", True))
        return out
