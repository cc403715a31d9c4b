"""Smoke stories: the real kube-scheduler (v1.35) places pods through our service on a
real kube-apiserver. Every assertion reads what the API server holds (or our /metrics),
never our logs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.controlplane import ControlPlane, StartStack, fake_nodes, metric_value

pytestmark = pytest.mark.e2e

#: node-3 is the coolest by far; node-5 is above the 0.9 filter threshold.
VALUES = {"node-1": 0.60, "node-2": 0.70, "node-3": 0.10, "node-4": 0.50, "node-5": 0.95}


def test_the_scheduler_binds_through_our_extender_to_the_coolest_node(
    stack: StartStack,
) -> None:
    s = stack(VALUES, nodes=5)

    s.create_pod("web")

    assert s.wait_bound("web") == "node-3"
    placed = s.wait_event("web", "Placed")
    assert placed.reporter == "decice.io/extender"
    assert placed.message.startswith("placed on node-3: score 9/10"), placed.message
    assert "1 filtered (cpu above 0.9)" in placed.message, placed.message
    scheduled = s.wait_event("web", "Scheduled")
    assert scheduled.message.endswith(f"{s.namespace}/web to node-3"), scheduled.message
    # Our /metrics count the bind once the API server has answered it: soon after, not
    # necessarily before the scheduler's informer shows the pod bound.
    bound = {"verb": "bind", "outcome": "bound"}
    s.kube.wait_until(
        lambda: s.extender_metric("decice_decisions_total", bound) == 1, 30, "one bind counted"
    )
    answered = {"verb": "bind", "code": "200"}
    s.kube.wait_until(
        lambda: s.extender_metric("decice_requests_total", answered) == 1, 30, "one 200 to /bind"
    )


def _scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = pod["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_a_pod_stays_pending_with_our_reason_when_every_node_is_hot(stack: StartStack) -> None:
    s = stack({f"node-{i}": 0.95 for i in range(1, 6)}, nodes=5)

    s.create_pod("hot")

    failed = s.wait_event("hot", "FailedScheduling")
    assert failed.type == "Warning"
    assert failed.message.startswith("0/5 nodes are available: "), failed.message
    assert "5 decice: cpu above 0.9." in failed.message, failed.message
    # The scheduler posts the Event and patches the pod's status apart: either may be first.
    pod = s.kube.wait_for_pod(
        s.namespace, "hot", _scheduled_condition, 30, "the PodScheduled condition is written"
    )
    assert not pod["spec"].get("nodeName")
    assert pod["status"]["phase"] == "Pending"
    condition = _scheduled_condition(pod)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert s.extender_metric("decice_requests_total", {"verb": "bind"}) == 0


def test_a_pod_still_schedules_among_1000_nodes(
    stack: StartStack, control_plane: ControlPlane
) -> None:
    kube = control_plane.kube
    kube.ensure_nodes([])  # measure the creation of all 1,000
    created = kube.add_nodes(fake_nodes(1000))
    print(f"\n1,000 fake nodes created in {created:.2f} s")
    # Every node passes the filter (0.40..0.89); node-777 is the one cool node.
    values = {f"node-{i}": 0.40 + (i % 50) / 100 for i in range(1, 1001)}
    values["node-777"] = 0.02
    s = stack(values, nodes=1000)

    s.create_pod("needle")

    assert s.wait_bound("needle") == "node-777"
    assert len(kube.nodes()) == 1000
    metrics = control_plane.scheduler_metrics()
    attempts = metric_value(metrics, "scheduler_scheduling_algorithm_duration_seconds_count")
    seconds = metric_value(metrics, "scheduler_scheduling_algorithm_duration_seconds_sum")
    print(f"scheduling algorithm: {attempts:.0f} attempt(s), {1000 * seconds:.1f} ms in all")
