"""extender.decisions.pods: one v1.Pod reader and one CPU-request rule for the filter and
the API path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender.decisions.pods import (
    DEFAULT_SCHEDULER,
    PodError,
    PodMemo,
    PodMemory,
    cpu_cores,
    cpu_request,
    read_pod,
)
from tests.harness.fixtures import APISERVER, fixture_json


@pytest.mark.parametrize(
    ("quantity", "cores"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        ("1.5", 1.5),
        ("0.25", 0.25),
        ("100000u", 0.1),
        ("250000000n", 0.25),
        ("1e3", 1000.0),
        ("5e-1", 0.5),
        ("1k", 1000.0),
        ("1Ki", 1024.0),
        (".5", 0.5),
        ("+2", 2.0),
    ],
)
def test_cpu_quantities(quantity: str, cores: float) -> None:
    assert cpu_cores(quantity) == pytest.approx(cores)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "m",
        "1e3m",
        "abc",
        "1.2.3",
        "-1",
        "5 cores",
        "1e",
        "1x",
        "NaN",
        "1e400",
        "1 m",
        "1_000",
        "\u0661",
    ],
)
def test_malformed_or_negative_quantities_are_none(bad: str) -> None:
    assert cpu_cores(bad) is None


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


def api_pod(name: str) -> dict[str, Any]:
    """The pod a captured kube-apiserver answer holds (tests/fixtures/kube-apiserver)."""
    doc: dict[str, Any] = orjson.loads((APISERVER / name).read_bytes())["response"]
    return doc


@pytest.mark.parametrize(
    ("fixture", "cores"),
    [
        # KEP-2837: pod-level requests (3) count in place of the containers' (500m).
        ("create-pod-level-resources.json", 3.0),
        ("create-pod-bound.json", 1.0),
        # A resize with no kubelet: the spec changed (1 -> 3), no container reports
        # otherwise, so the new spec counts.
        ("resize-pod.json", 3.0),
        # The kubelet resizing: runs with 1, 3 allocated: the larger counts.
        ("pod-status-resize-in-progress.json", 3.0),
        # A resize the node cannot take counts what runs and is allocated, not the spec.
        ("pod-status-resize-infeasible.json", 1.0),
    ],
)
def test_the_cpu_a_pod_is_counted_at_follows_the_scheduler(fixture: str, cores: float) -> None:
    """What kube-scheduler counts for a pod on its node (component-helpers PodRequests with
    status resources), read from pods as the real API server returned them."""
    pod_doc = api_pod(fixture)
    assert read_pod(pod_doc).cpu_request == pytest.approx(cores)
    assert cpu_request(pod_doc["spec"], status=pod_doc["status"]) == pytest.approx(cores)


def test_a_resize_down_counts_the_larger_until_the_kubelet_has_done_it() -> None:
    """Downsized in the spec (3 -> 1) while the container still runs with 3: the scheduler
    keeps counting 3 until the kubelet reports the smaller figure."""
    pod_doc = api_pod("pod-status-resize-in-progress.json")
    app = pod_doc["spec"]["containers"][0]
    app["resources"]["requests"]["cpu"] = "1"
    running = pod_doc["status"]["containerStatuses"][0]
    running["resources"]["requests"]["cpu"] = "3"
    running["allocatedResources"]["cpu"] = "1"
    assert read_pod(pod_doc).cpu_request == 3.0
    running["resources"]["requests"]["cpu"] = "1"  # done
    assert read_pod(pod_doc).cpu_request == 1.0


def test_status_resources_count_for_running_containers_and_sidecars_only() -> None:
    """An init container that ran to completion keeps its spec figure; a sidecar's resize
    counts as a container's does; a status naming no container changes nothing."""
    spec = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "2"}}},
            {
                "name": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "500m"}},
            },
        ],
    }

    def status(**running: str) -> dict[str, Any]:
        return {
            "initContainerStatuses": [
                {"name": n, "resources": {"requests": {"cpu": c}}} for n, c in running.items()
            ]
        }

    assert cpu_request(spec) == 2.0  # the setup container, before the sidecar started
    assert cpu_request(spec, status=status(setup="4")) == 2.0  # finished: its spec counts
    assert cpu_request(spec, status=status(proxy="2")) == 3.0  # app 1 + proxy 2
    assert cpu_request(spec, status={"containerStatuses": [{"name": "other"}]}) == 2.0
