"""An in-place resize moves what the herd guard holds (issue 46, item 3).

A pod placed a moment ago is held on its node until the metric shows it (herd.py), at
its expected use: with no measured use of its workload, its CPU request. In-place resize
(KEP-1287, GA in v1.35) changes that request on a running pod through the pods/resize
subresource. kube-scheduler counts a pod on its node at component-helpers PodRequests with
its status resources: the larger of what its spec asks, what its containers run with and
what is allocated to them (an infeasible resize: what runs and is allocated). Here no
kubelet runs: the API server accepts the resize into the spec (`metadata.generation`
bumps) and no container status ever reports it, so the scheduler counts the new spec at
once, up or down, and so do we (decisions/resources.py; the pod watch reads the held
pod's line again once its generation changes: cluster/watch_filter.py). With a kubelet a
resize down would count the old, larger figure until the kubelet reported it done
(tests/decisions/test_resources.py, from the API server's own shapes).

The story, with the shipped policy on a real Prometheus (node-2: 8 cores at 0.30):
`web` (1 core) is bound straight to node-2 and held at 1/8; resized to 3 cores the herd
guard holds 3/8 of node-2, and kube-scheduler agrees (a 5.5-core pod no longer fits
there by request: FailedScheduling, Insufficient cpu); resized down to 500m, 0.5/8.

First run (before the fix, the package of main): the herd guard kept holding 1/8 after
the resize: the pod watch's filter dropped the resized pod's event undecoded, as it drops
every update of a pod it has counted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.controlplane import FakeNode, Stack, StartStack, pod_manifest, shipped_policy
from tests.harness.promharness import PrometheusServer

pytestmark = pytest.mark.e2e

NODES = [FakeNode("node-2", cores=8, zone="zone-2")]


def held(s: Stack, node: str) -> float:
    """The herd load our filter adds to `node` now, from /explain of a probe filter call
    (a pod that is never created)."""
    probe: dict[str, Any] = pod_manifest("probe", cpu="100m")
    probe["metadata"].update(namespace=s.namespace, uid="probe-resize")
    status, body = s.service.post("/filter", {"Pod": probe, "Nodes": None, "NodeNames": [node]})
    assert status == 200, body
    status, body = s.service.get("/explain?uid=probe-resize")
    assert status == 200, body
    [row] = [r for r in json.loads(body)["nodes"] if r["node"] == node]
    load: float = row["metrics"]["cpu"]["herdLoad"]
    return load


def test_a_resize_moves_what_the_herd_guard_holds(
    stack: StartStack, shipped_prometheus: PrometheusServer
) -> None:
    s = stack(policy=shipped_policy(), env={"PROMETHEUS_URL": shipped_prometheus.url}, nodes=NODES)
    s.kube.create_pod(s.namespace, pod_manifest("web", cpu="1", node_name="node-2"))
    s.kube.wait_until(lambda: held(s, "node-2") == 1 / 8, 10, "web held at 1 core")

    resized = s.kube.resize_pod(s.namespace, "web", "c0", "3")
    assert resized["metadata"]["generation"] == 2
    assert "containerStatuses" not in resized["status"]  # no kubelet: nothing reports it
    s.kube.wait_until(lambda: held(s, "node-2") == 3 / 8, 10, "web held at 3 cores")

    # kube-scheduler counts the resized request too: 8 - 3 leaves no room for 5.5 cores.
    s.create_pod("big", cpu="5500m")
    refused = s.wait_event("big", "FailedScheduling", 30)
    assert "Insufficient cpu" in refused.message, refused.message

    s.kube.delete_pods(s.namespace, ["big"])

    s.kube.resize_pod(s.namespace, "web", "c0", "500m")
    s.kube.wait_until(lambda: held(s, "node-2") == 0.5 / 8, 10, "web held at 500m")
