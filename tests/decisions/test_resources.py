"""extender.decisions.resources: the CPU quantity grammar and the CPU a pod is counted
at, as kube-scheduler counts it (component-helpers PodRequests), on pods as the real API
server returned them (tests/fixtures/kube-apiserver)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender.decisions.pods import read_pod
from extender.decisions.resources import cpu_cores, cpu_request
from tests.harness.fixtures import APISERVER


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
