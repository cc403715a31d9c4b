"""What kube-scheduler v1.35.4 asks of our extender under each of its scheduling feature
gates, on and off (issue 46, item 3), and the one behaviour pinned: batching skips a
profile with extenders.

Each variant runs the same two steps on a fresh scheduler with the gates given, and
prints what the scheduler asked (from our /metrics and /explain, and its own log):

1. a burst of identical pods (the pods OpportunisticBatching would batch): how many
   filter, prioritize and bind calls, and how many nodes each pod's filter call named;
2. a preemption: the nodes full by request with low-priority pods, then a high-priority
   pod: the /preempt calls, the preemptor's calls after it, whether the preemption ran
   asynchronously (its log), and how many nodes its last filter call named.

The gates (`kube-scheduler --help`, v1.35.4): OpportunisticBatching (beta, on),
NominatedNodeNameForExpectation (beta, on), SchedulerAsyncPreemption (beta, on),
SchedulerAsyncAPICalls (beta, off). GangScheduling and GenericWorkload (alpha, off) cannot
run on these binaries: with them on, v1.35.4 lists scheduling.k8s.io/v1alpha1 Workloads,
which kube-apiserver v1.36.2 no longer serves (it serves v1alpha2 PodGroups and
Workloads, and drops `spec.workloadRef`), and never becomes ready (docs/scheduler-gates.md).

Pinned (every variant): each pod of the burst is filtered on every node, never handed a
cached node hint. v1.35.4 logs `Disabling signatures for profile because it has extenders
configured.` for decice_sched and so batches none of our pods; a release that batches
pods of a profile with extenders fails this test (docs/scheduler-gates.md says what
would change).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.controlplane import FakeNode, Stack, StartStack, pod_manifest, static_policy

pytestmark = pytest.mark.e2e

NODES = [FakeNode("node-1", cores=4), FakeNode("node-2", cores=8, zone="zone-2")]
VALUES = {"node-1": 0.20, "node-2": 0.30}
BURST = 4
LOW, HIGH = "gates-low", "gates-high"
SIGNATURES_OFF = "Disabling signatures for profile because it has extenders configured."

VARIANTS = [
    pytest.param({}, id="as-shipped"),
    pytest.param({"OpportunisticBatching": False}, id="batching-off"),
    pytest.param({"NominatedNodeNameForExpectation": False}, id="nnn-for-expectation-off"),
    pytest.param({"SchedulerAsyncPreemption": False}, id="async-preemption-off"),
    pytest.param({"SchedulerAsyncAPICalls": True}, id="async-api-calls-on"),
]


def calls(s: Stack) -> dict[str, float]:
    """Our verbs' request counts so far, by verb."""
    verbs = ("filter", "prioritize", "bind", "preempt")
    return {v: s.extender_metric("decice_requests_total", {"verb": v}) for v in verbs}


def since(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {v: int(after[v] - before[v]) for v in after if after[v] != before[v]}


def asked(s: Stack, name: str) -> int:
    """How many nodes the pod's last filter call named (/explain `candidates`)."""
    status, body = s.service.get(f"/explain?pod={s.namespace}/{name}")
    assert status == 200, body
    count: int = json.loads(body)["candidates"]
    return count


@pytest.mark.parametrize("gates", VARIANTS)
def test_what_the_scheduler_asks_of_us(stack: StartStack, gates: dict[str, bool]) -> None:
    policy = static_policy(VALUES, herdGuard={"waitForRoom": 0})
    s = stack(nodes=NODES, policy=policy, gates=gates)
    s.kube.priority_class(LOW, 0)
    s.kube.priority_class(HIGH, 1000)
    found: dict[str, Any] = {"gates": gates}
    log = s.control_plane.scheduler_output()
    found["signatures disabled for decice_sched"] = SIGNATURES_OFF in log

    # 1. A burst of identical pods.
    before = calls(s)
    names = [f"burst-{i}" for i in range(BURST)]
    s.kube.create_pods(s.namespace, [pod_manifest(n, cpu="100m") for n in names])
    s.kube.wait_all_bound(s.namespace, names, 30)
    found["burst calls"] = since(before, calls(s))
    found["burst nodes per filter"] = [asked(s, n) for n in names]

    # 2. A preemption: both nodes full by request, then an urgent pod.
    for node, cpu in (("node-1", "3500m"), ("node-2", "7500m")):
        s.kube.create_pod(
            s.namespace,
            pod_manifest(f"fill-{node}", cpu=cpu, priority_class_name=LOW, node_name=node),
        )
    before = calls(s)
    s.create_pod("urgent", cpu="2", priority_class_name=HIGH)
    node = s.wait_bound("urgent", 30)
    found["preemption calls"] = since(before, calls(s))
    found["urgent's last filter named nodes"] = asked(s, "urgent")
    log = s.control_plane.scheduler_output()
    found["preemption asynchronous"] = "Start the preemption asynchronously" in log
    print(f"\n{json.dumps(found)}")

    # Pinned, every variant: no pod of ours is batched (each is filtered on every node).
    assert found["burst nodes per filter"] == [len(NODES)] * BURST, found
    assert found["burst calls"].get("filter") == BURST, found
    if gates.get("OpportunisticBatching", True):
        assert found["signatures disabled for decice_sched"], "batching now covers extenders"
    # The preemption went through our /preempt and our bind, whatever the gates.
    assert found["preemption calls"].get("preempt", 0) >= 1, found
    assert found["preemption calls"].get("bind") == 1, found
    assert node in ("node-1", "node-2")
    assert found["preemption asynchronous"] == gates.get("SchedulerAsyncPreemption", True)


WFFC = "decice-wait-for-consumer"


def volume_objects(namespace: str, node: str) -> list[dict[str, Any]]:
    """A StorageClass that binds on first use, a local PersistentVolume on `node` and a
    claim of it: the scheduler's VolumeBinding has work in PreBind for a pod using it."""
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": WFFC},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{namespace}-pv"[:63]},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": WFFC,
                "local": {"path": "/mnt/data"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [node],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": WFFC,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]


@pytest.mark.parametrize("gates", VARIANTS[:1] + VARIANTS[2:3])
def test_a_pod_waiting_in_prebind_is_nominated_and_counted(
    stack: StartStack, gates: dict[str, bool]
) -> None:
    """NominatedNodeNameForExpectation (beta, on in v1.35.4): a pod whose binding waits (here
    VolumeBinding's PreBind, waiting for the PersistentVolume controller, which the test
    plays) carries `status.nominatedNodeName` while it waits, so our pod watch counts it on
    that node (decice_herd_reservations{source="nominated"}) before our /bind is asked;
    with the gate off nothing shows the pod's node until the bind."""
    policy = static_policy(VALUES, herdGuard={"enabled": True})
    s = stack(nodes=NODES, policy=policy, gates=gates)
    kube, ns = s.kube, s.namespace
    objects = volume_objects(ns, "node-2")
    kube.apply_all(objects, ns)
    pv = objects[1]["metadata"]["name"]
    # What the PersistentVolume controller would say of a new volume.
    kube.merge_patch(f"/api/v1/persistentvolumes/{pv}/status", {"status": {"phase": "Available"}})
    pod = pod_manifest("stateful", cpu="1")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    binds = s.extender_metric("decice_requests_total", {"verb": "bind"})
    kube.create_pod(ns, pod)

    # The scheduler chose node-2 and claimed the volume (PreBind), then waits for the claim
    # to be bound. (Its PV claimRef is the sign it got that far.)
    kube.wait_until(
        lambda: (
            (kube.get(f"/api/v1/persistentvolumes/{pv}")["spec"].get("claimRef") or {}).get("name")
            == "data"
        ),
        30,
        "the scheduler claimed the volume in PreBind",
    )
    waiting = s.pod("stateful")
    nominated = waiting["status"].get("nominatedNodeName")
    counted = s.extender_metric("decice_herd_reservations", {"source": "nominated"})
    print(f"\n{gates}: waiting in PreBind, nominatedNodeName={nominated!r}, counted {counted:g}")
    assert not waiting["spec"].get("nodeName")
    assert s.extender_metric("decice_requests_total", {"verb": "bind"}) == binds
    if gates.get("NominatedNodeNameForExpectation", True):
        assert nominated == "node-2"
        kube.wait_until(
            lambda: s.extender_metric("decice_herd_reservations", {"source": "nominated"}) == 1,
            10,
            "our pod watch counts the nominated pod on node-2",
        )
    else:
        assert nominated is None and counted == 0

    # The PersistentVolume controller's part: the claim bound to the volume.
    claim = f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data"
    kube.merge_patch(
        claim,
        {
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": pv},
        },
    )
    kube.merge_patch(f"{claim}/status", {"status": {"phase": "Bound"}})
    kube.merge_patch(f"/api/v1/persistentvolumes/{pv}/status", {"status": {"phase": "Bound"}})

    assert s.wait_bound("stateful", 60) == "node-2"
    assert s.extender_metric("decice_requests_total", {"verb": "bind"}) == binds + 1
    assert not s.pod("stateful")["status"].get("nominatedNodeName")  # cleared on binding
    kube.wait_until(
        lambda: s.extender_metric("decice_herd_reservations", {"source": "nominated"}) == 0,
        10,
        "the nomination became a placement",
    )
    kube.delete(f"/api/v1/persistentvolumes/{pv}")
