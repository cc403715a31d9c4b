"""extender.decisions.pods: one v1.Pod reader and one CPU-request rule for the filter and
the API path."""

from __future__ import annotations

from typing import Any

import pytest

from extender.decisions.pods import (
    DEFAULT_SCHEDULER,
    PodMemo,
    PodMemory,
    read_pod,
)
from extender.decisions.resources import PodError
from tests.harness.fixtures import fixture_json


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


def container(cpu: Any = None, **extra: Any) -> dict[str, Any]:
    resources = {} if cpu is None else {"requests": {"cpu": cpu}}
    return {"name": "c", "resources": resources, **extra}


@pytest.mark.parametrize(
    ("spec", "cores"),
    [
        ({}, None),
        ({"containers": [container()]}, None),
        ({"containers": [container("250m"), container(), container("1")]}, 1.25),
        ({"containers": [container(1)]}, 1.0),  # a JSON number, as kubectl never sends it
        ({"containers": [container("bogus"), container("500m")]}, 0.5),
        # the largest init container wins over a smaller sum
        ({"containers": [container("500m")], "initContainers": [container("2")]}, 2.0),
        ({"containers": [container("3")], "initContainers": [container("2")]}, 3.0),
        # a sidecar (restartable init container) runs beside everything after it
        (
            {
                "containers": [container("1")],
                "initContainers": [
                    container("500m", restartPolicy="Always"),
                    container("2"),
                ],
            },
            2.5,
        ),
        ({"containers": [container("1")], "overhead": {"cpu": "250m"}}, 1.25),
        ({"containers": [container("1")], "resources": {"requests": {"cpu": "3"}}}, 3.0),
    ],
)
def test_effective_cpu_request(spec: dict[str, Any], cores: float | None) -> None:
    facts = read_pod(pod(spec))
    assert facts.cpu_request == (None if cores is None else pytest.approx(cores))


def test_read_pod_identity_and_defaults() -> None:
    facts = read_pod({"metadata": {"name": "p"}})
    assert (facts.name, facts.namespace, facts.uid) == ("p", "default", "")
    assert facts.scheduler_name == DEFAULT_SCHEDULER
    assert facts.node_name == ""
    bound = read_pod(pod({"schedulerName": "decice_sched", "nodeName": "node-1"}))
    assert (bound.scheduler_name, bound.node_name) == ("decice_sched", "node-1")


def test_the_captured_pod_reads_the_same_from_the_scheduler_and_the_api() -> None:
    """The filter path reads the Pod inside ExtenderArgs, the bind path after a restart
    reads the pod the API returns: the same document gives the same facts."""
    scheduler_pod = fixture_json("filter-nodecache.json")["Pod"]
    facts = read_pod(scheduler_pod)
    assert facts.cpu_request == 0.5
    assert read_pod(scheduler_pod, where="pod") == facts


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (None, "Pod: must be an object, got NoneType"),
        ({}, "Pod: missing field 'metadata'"),
        ({"metadata": []}, "Pod.metadata: must be dict"),
        ({"metadata": {"name": 5}}, "Pod.metadata.name: must be str"),
        ({"metadata": {"name": "p", "uid": 1}}, "Pod.metadata.uid: must be str"),
        ({"metadata": {"name": "p"}, "spec": [1]}, "Pod.spec: must be an object"),
        ({"metadata": {"name": "p"}, "spec": {"containers": {}}}, "Pod.spec.containers"),
        ({"metadata": {"name": "p"}, "spec": {"schedulerName": 7}}, "schedulerName: must be"),
    ],
)
def test_bad_pods_name_the_field(doc: Any, message: str) -> None:
    with pytest.raises(PodError, match=message.replace("[", r"\[")):
        read_pod(doc)


def test_pod_memory_is_bounded_and_keeps_the_latest() -> None:
    memory = PodMemory(capacity=2)
    for uid in ("a", "b", "c"):
        memory.remember(
            PodMemo(read_pod(pod({}) | {"metadata": {"name": uid, "uid": uid}}), frozenset())
        )
    assert len(memory) == 2
    assert memory.get("a") is None and memory.get("c") is not None
    memory.remember(PodMemo(read_pod({"metadata": {"name": "no-uid"}}), frozenset()))
    assert len(memory) == 2  # a pod without a UID is never remembered
