"""Preemption right after a burst, with the shipped policy (issue 46, items 1 and 3).

The cluster of the issue: nodes of 4, 8 and 4 cores, node-1 hot in a real Prometheus
(config/extender.yaml's query over a stock exporter's series: `shipped_prometheus`);
low-priority fillers fill each node by request (3.8, 7.8 and 3.8 cores); 3 s later a
3-core high-priority pod fits nowhere. kube-scheduler's NodeResourcesFit rejects every
node, its dry run picks a filler per node, and it asks our /preempt once: our answer
decides whether the pod is placed now or waits minutes. The fillers' herd reservations
(settle 45 s, then fading over the 1-minute window) still stand 3 s later; /preempt
judges each node as it will be once its victims are gone (decisions/preemption.py).

1. The victims bound 3 s before the preemptor, straight onto their nodes (`spec.nodeName`:
   our pod watch counts them) or placed by our own bind (the node-1 filler is always
   bound straight: our filter keeps pods off the hot node).
2. Preempt, then a second pod arrives at once: the room the victim leaves is the
   preemptor's. kube-scheduler counts the nominated preemptor there for pods of lower
   or equal priority; our herd guard counts it too (decisions.state.DecisionState
   .nominate), so the second pod goes to the other node it fits, and nobody else is
   evicted. The second pod gets its chance while the preemptor waits out its back-off,
   as it does whenever the scheduler's active queue is busy (a burst): the story turns
   SchedulerPopFromBackoffQ off and sets podInitialBackoffSeconds to 3 so that window is
   there on cue rather than under load.

Each story runs with kube-scheduler's gates as v1.35.4 ships them and with
SchedulerAsyncAPICalls on (GATE_VARIANTS), and with the API server answering only after our
service started and failed its first list (API_LATE: the issue's "preemption depends on
when the API server came up"), and holds every story's invariants: every pod
bound once (one Scheduled Event), only the victim evicted.

What the first runs showed (before the fixes of issue 46; the package of main first on
PYTHONPATH):
- story 1 passed in every variant (direct and our-bind, 3 s and 20 s, gates as shipped
  and SchedulerAsyncAPICalls on): main already took the victims' reservations off
  (issue 35's fix), and the node sizes were known. The issue's measurement did not
  reproduce on main; nothing in its logs pointed elsewhere (one /preempt, the victim's
  node kept, the pod bound 15 ms after its victim was deleted).
- story 2 failed: the second pod took node-2 (our filter passed it: 0.30 measured, the
  nominated preemptor not counted). The preemptor, back from its back-off, was turned
  away by our filter there (0.30 + 3/8 + 3/8 > 0.85, "cpu above 0.85 with this pod", then
  in FailedNodes); kube-scheduler tried to preempt on node-2, where its own filters found
  room without any victim, and v1.35.4 failed the attempt: `preemption: expected at least
  one victim pod on node "node-2"`. The preemptor stayed pending (the shipped
  waitForRoom is 30 minutes).
- with the pod watch alone counting the nomination, story 2 still failed one run in two:
  the watch's events come a batch (0.1 s) late, and the second pod was filtered before the
  nomination arrived; /preempt now counts the preemptor at once when it leaves one node.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import API_LATE, GATE_VARIANTS, MIXED_NODES
from tests.harness.controlplane import (
    FakeNode,
    Stack,
    StartStack,
    pod_manifest,
    shipped_policy,
)
from tests.harness.promharness import PrometheusServer

pytestmark = pytest.mark.e2e

NODES = MIXED_NODES
#: name -> (node, CPU request): each node filled by request.
FILLERS = {
    "fill-1": ("node-1", "3800m"),
    "fill-2": ("node-2", "7800m"),
    "fill-3": ("node-3", "3800m"),
}
LOW, MID, HIGH = "recent-low", "recent-mid", "recent-high"
#: Seconds between the fillers and the urgent pod, as the issue tells it.
PAUSE = 3.0


def policy(fillers_through_us: bool) -> dict[str, Any]:
    """config/extender.yaml whole; when our bind places the fillers, but their wait for
    room: they fit under the threshold by expected use nowhere (3.8 of 4 cores), so the
    shipped herd guard would hold each for herdGuard.waitForRoom (1800 s) before the
    roomiest node (that wait is shown in tests/stories); here they go where kube-scheduler
    alone would place them."""
    shipped = shipped_policy()
    if fillers_through_us:
        shipped["herdGuard"]["waitForRoom"] = 0
    return shipped


def start(
    stack: StartStack,
    prometheus: PrometheusServer,
    nodes: list[FakeNode],
    fillers_through_us: bool = False,
    **kw: Any,
) -> Stack:
    env = {"PROMETHEUS_URL": prometheus.url}
    s = stack(policy=policy(fillers_through_us), env=env, nodes=nodes, **kw)
    for name, value in ((LOW, 0), (MID, 500), (HIGH, 1000)):
        s.kube.priority_class(name, value)
    return s


def fill(s: Stack, direct: bool) -> dict[str, str]:
    """The fillers, bound straight onto their nodes or through the scheduler and our bind;
    pod -> node."""
    for name, (node, cpu) in FILLERS.items():
        straight = direct or node == "node-1"
        manifest = pod_manifest(name, cpu=cpu, priority_class_name=LOW)
        if straight:
            manifest["spec"]["nodeName"] = node
        s.kube.create_pod(s.namespace, manifest)
        assert s.wait_bound(name, 30) == node
    return {name: node for name, (node, _) in FILLERS.items()}


def scheduled_once(s: Stack, names: list[str]) -> None:
    """Every pod got exactly one Scheduled Event (bound once). kube-scheduler records the
    Event after the Binding, through its event broadcaster: wait until each pod has one."""

    def counts() -> dict[str, int]:
        events = s.kube.events_by_pod(s.namespace)
        return {n: [e.reason for e in events.get(n, [])].count("Scheduled") for n in names}

    s.kube.wait_until(lambda: all(counts().values()), 15, "a Scheduled Event for every pod")
    assert counts() == dict.fromkeys(names, 1), counts()


SHIPPED_GATES, ASYNC_API_CALLS = (v.values[0] for v in GATE_VARIANTS)
ON_TIME, LATE = (v.values[0] for v in API_LATE)


@pytest.mark.parametrize(
    ("placed_by", "scheduler_gates", "api_late"),
    [
        pytest.param("direct", SHIPPED_GATES, ON_TIME, id="direct-gates-as-shipped"),
        pytest.param("our-bind", SHIPPED_GATES, ON_TIME, id="our-bind-gates-as-shipped"),
        pytest.param("our-bind", ASYNC_API_CALLS, ON_TIME, id="our-bind-async-api-calls"),
        # the service up before the API server: it learns the nodes when it answers
        pytest.param("direct", SHIPPED_GATES, LATE, id="direct-api-late"),
        pytest.param("our-bind", SHIPPED_GATES, LATE, id="our-bind-api-late"),
    ],
    indirect=["scheduler_gates", "api_late"],
)
def test_victims_bound_3s_before_the_preemptor_make_room_for_it(
    stack: StartStack, shipped_prometheus: PrometheusServer, placed_by: str
) -> None:
    s = start(stack, shipped_prometheus, NODES, fillers_through_us=placed_by == "our-bind")
    where = fill(s, direct=placed_by == "direct")
    time.sleep(PAUSE)  # the story's pause, not a wait for a condition
    s.create_pod("urgent", cpu="3", priority_class_name=HIGH)

    node = s.wait_bound("urgent", 30)

    # node-1 and node-3 (4 cores) stay over 0.85 with a 3-core pod whatever leaves them
    # (0.30 + 3/4); node-2 holds 0.30 + 3/8 once fill-2 and its reservation are gone.
    assert node == "node-2"
    assert s.deleted(list(FILLERS)) == ["fill-2"]
    preempted = s.wait_event("fill-2", "Preempted", 30)
    uid = s.pod("urgent")["metadata"]["uid"]
    assert preempted.message == f"Preempted by pod {uid} on node node-2", preempted
    scheduled_once(s, ["urgent"] if placed_by == "direct" else ["urgent", "fill-2", "fill-3"])
    assert s.extender_metric("decice_requests_total", {"verb": "preempt", "code": "200"}) >= 1
    print(f"\n{placed_by}: urgent -> {node}; fillers were on {where}")


#: Story 2 adds node-4 (8 cores, 0.40 in Prometheus, empty): the second pod fits there.
NODES_AND_ROOM = [*NODES, FakeNode("node-4", cores=8, zone="zone-1")]


@pytest.mark.parametrize(
    ("scheduler_gates", "api_late"),
    [
        pytest.param(SHIPPED_GATES, ON_TIME, id="gates-as-shipped"),
        pytest.param(ASYNC_API_CALLS, ON_TIME, id="async-api-calls"),
        pytest.param(SHIPPED_GATES, LATE, id="api-late"),
    ],
    indirect=True,
)
def test_the_room_a_preemption_frees_is_the_preemptors(
    stack: StartStack, shipped_prometheus: PrometheusServer
) -> None:
    s = start(
        stack,
        shipped_prometheus,
        NODES_AND_ROOM,
        gates={"SchedulerPopFromBackoffQ": False},
        scheduler_overrides={"podInitialBackoffSeconds": 3},
    )
    fill(s, direct=True)
    # The preemptor must go to zone-2 (node-2): node-4 would take it without preempting.
    urgent = pod_manifest("urgent", cpu="3", priority_class_name=HIGH)
    urgent["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-2"}
    s.kube.create_pod(s.namespace, urgent)
    s.kube.wait_until(lambda: s.deleted(["fill-2"]), 30, "the preemption deleted fill-2")
    nominated = s.pod("urgent")
    assert nominated["status"].get("nominatedNodeName") == "node-2", nominated["status"]
    assert not nominated["spec"].get("nodeName"), "urgent bound already: no window to test"

    # At once, a pod of lower priority that fits node-2 (by request: 8 - 3 nominated) and
    # node-4; node-2 is the cooler of the two in Prometheus.
    s.create_pod("next", cpu="3", priority_class_name=MID)

    assert s.wait_bound("next", 30) == "node-4"
    assert s.wait_bound("urgent", 30) == "node-2"
    assert s.deleted([*FILLERS, "next", "urgent"]) == ["fill-2"]
    scheduled_once(s, ["urgent", "next"])
    assert s.extender_metric("decice_herd_reservations", {"source": "nominated"}) == 0
