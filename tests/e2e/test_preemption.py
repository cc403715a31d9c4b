"""Preemption: an urgent pod that fits nowhere preempts a filler placed a moment ago.

The real kube-scheduler finds the victims by requests and asks our /preempt which of its
candidate nodes we accept. /preempt judges each node as it would be once its victims are
gone (extender/decisions/preemption.py, `passing_after_victims`): the victims' herd-guard
reservations come off, the preemptor's own request goes on, and the filter is applied.

Without that fix (before it, /preempt kept the nodes the current filter table passes,
`table.passes(node)`) this very story fails: each filler's reservation (7 of 8 cores) puts
its node at 0.30 + 0.875 = 1.175 > 0.9 in the table, so every candidate was dropped, the
scheduler reported `preemption: no candidate node for preemption` and the
urgent pod stayed Pending. The test shows that table verdict on the live service right
before the urgent pod arrives. Checked once by hand, with a copy of the package whose
`Engine.preempt` is the old one first on PYTHONPATH: kube-scheduler logged `0/4 nodes are
available: 1 decice: cpu above 0.9, 3 Insufficient cpu. no new claims to deallocate,
preemption: no candidate node for preemption` and this test timed out waiting for the bind.

A second bug this story found: the scheduler asks our filter for the urgent pod again 3 ms
after deleting its victim, before our pod watch has seen the deletion. Judged on the table,
the chosen node still carried the victim's reservation, so it was rejected and the
scheduler preempted on the next node, then the next: all three fillers evicted for one pod.
The filter now judges the nodes /preempt accepted as /preempt did, for the preemptor only
(decisions.preemption.Preemptions), and the test checks that exactly one filler is gone.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import GATE_VARIANTS
from tests.harness.controlplane import (
    FakeNode,
    Stack,
    StartStack,
    pod_manifest,
    static_policy,
)

pytestmark = pytest.mark.e2e

#: Four 8-core nodes; node-1 is hot (our filter rejects it), the others cool.
NODES = [FakeNode(f"node-{i}", cores=8, zone=f"zone-{(i - 1) % 2 + 1}") for i in range(1, 5)]
VALUES = {"node-1": 0.95, "node-2": 0.0, "node-3": 0.0, "node-4": 0.0}
LOW, HIGH = "e2e-low", "e2e-high"


def table_verdicts(s: Stack, cpu: str) -> dict[str, str]:
    """node -> reason for the nodes our filter table rejects now, for a pod requesting
    `cpu` (a probe that is never created)."""
    probe = pod_manifest("probe", cpu=cpu)
    probe["metadata"].update(namespace=s.namespace, uid="probe-not-a-pod")
    names = [n.name for n in NODES]
    status, body = s.service.post("/filter", {"Pod": probe, "Nodes": None, "NodeNames": names})
    assert status == 200, body
    return dict(json.loads(body)["FailedAndUnresolvableNodes"] or {})


@pytest.mark.parametrize(
    "shortlist",
    [
        pytest.param(None, id="shipped"),
        # The filter passes one node: each filler gets our best, the urgent pod (which fits
        # nowhere) is never cut, so preemption sees every node as before.
        pytest.param({"nodes": 1, "share": 0.01}, id="shortlist-of-one"),
    ],
)
@pytest.mark.parametrize("scheduler_gates", GATE_VARIANTS, indirect=True)
def test_an_urgent_pod_preempts_a_filler_placed_a_moment_ago(
    stack: StartStack, shortlist: dict[str, float] | None
) -> None:
    # Refreshes every 2 s (the reservations still hold: settle is 30 s). A safety net, not
    # a need of the story: were the scheduler to retry the urgent pod before our pod watch
    # saw its victim deleted, our filter would turn it away on the victim's reservation,
    # and only a refresh (engine.recovered -> requeue) would let it back in; with the
    # default `static_policy` (interval 3600) it would wait out the scheduler's 5 minutes.
    # A 7-core filler fits under 0.9 on an idle 8-core node (7/8), one a node.
    policy = static_policy(VALUES, prometheus={"interval": 2.0}, herdGuard={"enabled": True})
    if shortlist is not None:
        policy["prioritize"] = {"shortlist": shortlist}
    s = stack(policy=policy, nodes=NODES)
    s.kube.priority_class(LOW, 0)
    s.kube.priority_class(HIGH, 1000)

    # A burst of low-priority fillers: one 7-core filler fits each 8-core node, and our
    # filter keeps them off node-1.
    fillers = [f"filler-{i}" for i in range(1, 4)]
    s.kube.create_pods(
        s.namespace, [pod_manifest(n, cpu="7", priority_class_name=LOW) for n in fillers]
    )
    where = s.kube.wait_all_bound(s.namespace, fillers, 60)
    assert sorted(where.values()) == ["node-2", "node-3", "node-4"], where
    if shortlist is not None:  # the first filler scheduled had three nodes, and got one
        cuts = []
        for name in fillers:
            status, body = s.service.get(f"/explain?pod={s.namespace}/{name}")
            assert status == 200, body
            cuts.append(json.loads(body).get("shortlisted"))
        assert 1 in cuts and set(cuts) <= {1, None}, cuts

    # What the filter says now of a 2-core pod: every node rejected, node-1 for its load,
    # the others too small for it beside their filler's reservation (the verdict /preempt
    # used before the fix).
    small = "decice: cpu above 0.9 with this pod"
    assert table_verdicts(s, "2") == {
        "node-1": "decice: cpu above 0.9",
        **dict.fromkeys(["node-2", "node-3", "node-4"], small),
    }

    s.create_pod("urgent", cpu="2", priority_class_name=HIGH)
    node = s.wait_bound("urgent", 60)

    assert node != "node-1"
    [victim] = [name for name, on in where.items() if on == node]
    gone = s.deleted(fillers)
    assert gone == [victim], f"deleted: {gone}, expected only {victim} (on {node})"
    assert s.extender_metric("decice_requests_total", {"verb": "preempt", "code": "200"}) >= 1
    preempted = s.wait_event(victim, "Preempted", 30)
    print(f"\nurgent -> {node}; {victim}: {preempted.reason}: {preempted.message}")
    urgent_uid = s.pod("urgent")["metadata"]["uid"]
    assert preempted.message == f"Preempted by pod {urgent_uid} on node {node}", preempted
    s.wait_event("urgent", "Scheduled", 30)  # recorded after the Binding, asynchronously
    urgent_events = s.events("urgent")
    for e in urgent_events:
        print(f"urgent: {e.reason}: {e.message}")
    reasons = [e.reason for e in urgent_events]
    assert reasons.count("Scheduled") == 1, reasons
