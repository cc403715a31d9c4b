"""Bind stories: our /bind creates the pod's Binding on the real API server, under the
pod's UID as a precondition, recognises a retried bind, and never binds a pod twice.

Two of the stories call our /bind themselves, as the scheduler would: the moment they
need (a pod re-created between filter and bind, a bind whose answer was lost) cannot be
timed from outside the scheduler. Their pods carry a nodeSelector no node matches, so
the real scheduler's own filters turn them away before it ever calls us, and nobody but
the test binds them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import GATE_VARIANTS
from tests.harness.controlplane import JSON, Stack, StartStack, metric_value, pod_manifest

pytestmark = pytest.mark.e2e

#: node-3 is the coolest; every node passes the filter.
VALUES = {"node-1": 0.60, "node-2": 0.70, "node-3": 0.10, "node-4": 0.50, "node-5": 0.40}
NODE_NAMES = list(VALUES)
NOWHERE = {"decice.io/e2e-nowhere": "true"}


def unschedulable(name: str) -> JSON:
    """A pod of ours the scheduler never gets to call us for (no node matches)."""
    pod = pod_manifest(name)
    pod["spec"]["nodeSelector"] = dict(NOWHERE)
    return pod


def call(s: Stack, verb: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST one extender verb to our service, as kube-scheduler does; the decoded answer."""
    status, raw = s.service.post(f"/{verb}", body)
    assert status == 200, raw
    answer: dict[str, Any] = json.loads(raw)
    return answer


def filter_call(s: Stack, pod: JSON) -> dict[str, Any]:
    """Our /filter for `pod` (the API server's object) over every node, node-cache style."""
    return call(s, "filter", {"Pod": pod, "Nodes": None, "NodeNames": NODE_NAMES})


def bind_call(s: Stack, name: str, uid: str, node: str) -> str:
    """Our /bind; the Error it answers ("" on success)."""
    body = {"PodName": name, "PodNamespace": s.namespace, "PodUID": uid, "Node": node}
    return str(call(s, "bind", body).get("Error") or "")


def bind_outcomes(s: Stack) -> dict[str, float]:
    status, body = s.service.get("/metrics")
    assert status == 200
    text = body.decode()
    outcomes = ("bound", "already-bound", "refused", "error")
    return {
        o: metric_value(text, "decice_decisions_total", {"verb": "bind", "outcome": o})
        for o in outcomes
    }


def binding_conflicts(s: Stack) -> float:
    """409s the API server has answered to Binding requests (its own /metrics)."""
    labels = {"verb": "POST", "resource": "pods", "subresource": "binding", "code": "409"}
    return metric_value(s.kube.text("/metrics"), "apiserver_request_total", labels)


def test_a_pod_recreated_between_filter_and_bind_is_not_bound(stack: StartStack) -> None:
    s = stack(VALUES, nodes=5)
    old = s.kube.create_pod(s.namespace, unschedulable("twin"))
    old_uid = old["metadata"]["uid"]
    assert filter_call(s, old)["NodeNames"] == NODE_NAMES

    # Deleted and re-created under the same name between our filter and our bind.
    s.kube.delete_pods(s.namespace, ["twin"])
    new = s.kube.create_pod(s.namespace, unschedulable("twin"))
    new_uid = new["metadata"]["uid"]
    assert new_uid != old_uid

    conflicts = binding_conflicts(s)
    error = bind_call(s, "twin", old_uid, "node-3")
    print(f"\nour /bind answered: {error}")

    # Our filter saw the old pod, so the bind went to the API server with the old UID as
    # its precondition, and the API server's refusal is why it failed: a 409 on the
    # precondition as a rule; once in 20 runs of the e2e loop (2026-11-26) a 404 for the
    # pod, right after the new pod's create had answered (the cause is the API server's,
    # not pinned down: its watch cache between the delete and the create is the likely
    # place). Either way the new pod is not bound, and the failure is ours to report.
    assert error.startswith(f"decice: bind of {s.namespace}/twin to node-3 failed: "), error
    if "Kubernetes API 404 NotFound" in error:
        assert 'pods "twin" not found' in error, error
    else:
        assert "Kubernetes API 409 Conflict" in error, error
        assert "Precondition failed" in error, error
        assert f"UID in precondition: {old_uid}" in error, error
        assert f"UID in object meta: {new_uid}" in error, error
        assert binding_conflicts(s) == conflicts + 1
    assert s.pod("twin")["spec"].get("nodeName") is None
    assert bind_outcomes(s) == {"bound": 0, "already-bound": 0, "refused": 0, "error": 1}


def test_a_retried_bind_is_recognised(stack: StartStack) -> None:
    s = stack(VALUES, nodes=5)

    # The scheduler binds "web" through us; then the same bind comes again.
    web = s.create_pod("web")
    assert s.wait_bound("web") == "node-3"
    s.kube.wait_until(lambda: bind_outcomes(s)["bound"] == 1, 30, "our bind is counted")
    conflicts = binding_conflicts(s)
    assert bind_call(s, "web", web["metadata"]["uid"], "node-3") == ""
    # The same pod to another node: refused, naming where it is.
    elsewhere = bind_call(s, "web", web["metadata"]["uid"], "node-5")
    assert "already bound to node 'node-3'" in elsewhere, elsewhere
    # Both answered from what our binder remembers: no call reached the API server.
    assert binding_conflicts(s) == conflicts

    # A bind whose answer was lost: the Binding was created (here by the test, as our
    # first call would have), and the retry reaches the API server, which answers 409
    # "already assigned" even for the same node: that is a success.
    lost = s.kube.create_pod(s.namespace, unschedulable("lost"))
    assert "node-2" in filter_call(s, lost)["NodeNames"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "lost", "uid": lost["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-2"},
    }
    s.kube.post(f"/api/v1/namespaces/{s.namespace}/pods/lost/binding", binding)
    assert bind_call(s, "lost", lost["metadata"]["uid"], "node-2") == ""
    assert binding_conflicts(s) == conflicts + 1  # the API server's 409, taken as success

    assert (s.pod("web")["spec"]["nodeName"], s.pod("lost")["spec"]["nodeName"]) == (
        "node-3",
        "node-2",
    )
    outcomes = bind_outcomes(s)
    assert outcomes == {"bound": 1, "already-bound": 2, "refused": 1, "error": 0}, outcomes
    scheduled = [e for e in s.events("web") if e.reason == "Scheduled"]
    assert [e.count for e in scheduled] == [1], scheduled


@pytest.mark.parametrize("scheduler_gates", GATE_VARIANTS, indirect=True)
def test_no_pod_of_a_burst_is_bound_twice(stack: StartStack) -> None:
    s = stack(VALUES, nodes=5)
    names = [f"burst-{i:02d}" for i in range(60)]

    s.kube.create_pods(s.namespace, [pod_manifest(n) for n in names])
    s.kube.wait_all_bound(s.namespace, names, 60)

    # The scheduler posts an Event per bind it did; they may trail the pods' binding.
    events: dict[str, list[Any]] = {}

    def every_pod_has_its_event() -> bool:
        events.clear()
        events.update(s.kube.events_by_pod(s.namespace))
        return all(any(e.reason == "Scheduled" for e in events.get(n, ())) for n in names)

    s.kube.wait_until(every_pod_has_its_event, 30, "a Scheduled Event for every pod")
    scheduled = {n: sum(e.count for e in events[n] if e.reason == "Scheduled") for n in names}
    twice = {n: c for n, c in scheduled.items() if c != 1}
    assert not twice, f"pods with other than one Scheduled Event: {twice}"
    s.kube.wait_until(
        lambda: bind_outcomes(s)["bound"] == len(names), 30, "every bind counted once"
    )
    assert bind_outcomes(s) == {"bound": len(names), "already-bound": 0, "refused": 0, "error": 0}
