"""extender.decisions.usage: a pod's workload, named as kube-prometheus names it."""

from __future__ import annotations

from typing import Any

import pytest

from extender.decisions.usage import WorkloadKey, workload_of


def owner(kind: str, name: str, controller: bool | None = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "x"}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(
    ("owners", "labels", "expected"),
    [
        (
            [owner("ReplicaSet", "web-7d9f8c6b5")],
            {"pod-template-hash": "7d9f8c6b5"},
            WorkloadKey("ns", "deployment", "web"),
        ),
        (
            [owner("ReplicaSet", "web-7d9f8c6b5")],
            {},
            WorkloadKey("ns", "replicaset", "web-7d9f8c6b5"),
        ),
        (
            [owner("ReplicaSet", "web-abc")],
            {"pod-template-hash": "zzz"},
            WorkloadKey("ns", "replicaset", "web-abc"),
        ),
        ([owner("StatefulSet", "db")], None, WorkloadKey("ns", "statefulset", "db")),
        ([owner("DaemonSet", "agent")], None, WorkloadKey("ns", "daemonset", "agent")),
        ([owner("Job", "backup-28")], None, WorkloadKey("ns", "job", "backup-28")),
        ([owner("Node", "node-1")], None, None),  # a static pod
        (
            [owner("Other", "x", False), owner("StatefulSet", "db")],
            None,
            WorkloadKey("ns", "statefulset", "db"),
        ),
        ([owner("StatefulSet", "db", None)], None, WorkloadKey("ns", "statefulset", "db")),
        ([owner("StatefulSet", "a", False), owner("StatefulSet", "b", False)], None, None),
        (None, None, None),
        ("junk", {}, None),
        ([{"kind": 7, "name": "x", "controller": True}], None, None),
        ([{"kind": "Job", "name": "", "controller": True}], None, None),
    ],
)
def test_workload_of(owners: Any, labels: Any, expected: WorkloadKey | None) -> None:
    assert workload_of("ns", owners, labels) == expected
