"""Turned away, then placed: a pod every node is too hot for waits Pending with our reason;
when one node cools, our requeue lets the real scheduler place it at once, not after its
5-minute unschedulable wait (kubernetes pkg/scheduler/backend/queue/scheduling_queue.go,
DefaultPodMaxInUnschedulablePodsDuration; measured on this chain: 324 s without our
requeue, 34 s with it).

The node values come from a real Prometheus scraping a fake exporter
(tests/harness/promharness.py), read by the shipped policy config/extender.yaml whole
(its stock-install query) with only `prometheus.interval` shortened. Not the static
provider: a static value cannot cool. Its values are read at start only; a live reload
applies `policies`, `metrics`, `defaultPolicy` and `herdGuard` (extender/policy/reload.py,
RELOADABLE), and a new `static` section is logged as needing a restart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.controlplane import REPO, Stack, StartStack, metric_samples
from tests.harness.promharness import FakeExporter, PrometheusServer, prometheus_binary

pytestmark = pytest.mark.e2e

#: prometheus.interval of the story: the seconds between two refreshes of ours.
INTERVAL = 2.0
HOT, COOL = 0.95, 0.30
NODES = [f"node-{i}" for i in range(1, 6)]


def shipped_policy() -> dict[str, Any]:
    policy: dict[str, Any] = yaml.safe_load((REPO / "config" / "extender.yaml").read_text())
    policy["prometheus"]["interval"] = INTERVAL
    return policy


def node_values(s: Stack) -> dict[str, float]:
    """node -> cpu value in the snapshot our service decides on (its /metrics)."""
    status, body = s.service.get("/metrics")
    assert status == 200, body
    return {
        labels["node"]: value
        for labels, value in metric_samples(body.decode(), "decice_node_metric")
        if labels.get("metric") == "cpu"
    }


@contextlib.contextmanager
def serving(
    stack: StartStack, tmp_path: Path, values: Mapping[str, float]
) -> Iterator[tuple[Stack, FakeExporter]]:
    """Our service on the shipped policy, reading a real Prometheus that scrapes `values`,
    once it sees them: until its refresh has them every node passes (the shipped metric is
    fail-open), and Prometheus scrapes its first ~5 s after it starts."""
    with FakeExporter() as exporter:
        for node, value in values.items():
            exporter.set(node, value)
        with PrometheusServer(
            [exporter.target], workdir=tmp_path / "prometheus", binary=prometheus_binary()
        ) as prometheus:
            s = stack(policy=shipped_policy(), env={"PROMETHEUS_URL": prometheus.url})
            s.kube.wait_until(
                lambda: node_values(s) == values, 60, "our service sees the nodes' values"
            )
            yield s, exporter


def test_a_pod_every_node_turned_away_is_placed_once_a_node_cools(
    stack: StartStack, tmp_path: Path
) -> None:
    with serving(stack, tmp_path, dict.fromkeys(NODES, HOT)) as (s, exporter):
        s.create_pod("waiting")

        failed = s.wait_event("waiting", "FailedScheduling")
        print(f"\nFailedScheduling: {failed.message}")
        above = shipped_policy()["metrics"][0]["filter"]["above"]
        expected = f"0/5 nodes are available: 5 decice: cpu above {above:g}."
        assert failed.message.startswith(expected), failed.message
        s.kube.wait_until(
            lambda: s.extender_metric("decice_turned_away_pods") == 1,
            30,
            "our service remembers the pod it turned away",
        )
        assert not s.pod("waiting")["spec"].get("nodeName")

        exporter.set("node-3", COOL)
        cooled = time.monotonic()
        node = s.wait_bound("waiting", INTERVAL + 30)
        waited = time.monotonic() - cooled

    print(f"bound to {node} {waited:.2f} s after node-3 cooled (interval {INTERVAL:g} s)")
    assert node == "node-3"
    assert waited <= INTERVAL + 5, f"bound {waited:.1f} s after the node cooled"
    # Our requeue patch is what made the scheduler try again at once.
    pod = s.pod("waiting")
    assert "decice.io/metrics-recovered" in (pod["metadata"].get("annotations") or {})
    assert s.extender_metric("decice_requeue_patches_total", {"outcome": "patched"}) == 1
    assert s.extender_metric("decice_turned_away_pods") == 0


def test_a_pod_too_big_for_every_node_of_a_cluster_with_room_is_placed_at_once(
    stack: StartStack, tmp_path: Path
) -> None:
    """herdGuard.spareRoom, shipped at 0.2: the 8-core nodes are hot, the 4-core ones at 0.2
    and 0.24, so a 3-core pod fits under 0.85 nowhere (2.6 and 2.44 cores of headroom), yet
    the cluster's headroom is 27 % of its 28 cores. It is bound at once to the node with the
    most headroom that it leaves under 100 % (node-3: 0.2 + 0.75), not held for
    herdGuard.waitForRoom."""
    values = {"node-1": 0.24, "node-2": 0.95, "node-3": 0.2, "node-4": 0.95, "node-5": 0.24}
    with serving(stack, tmp_path, values) as (s, _):
        s.create_pod("big", cpu="3")
        node = s.wait_bound("big", INTERVAL + 30)
    assert node == "node-3"
    assert s.extender_metric("decice_turned_away_pods") == 0
