"""The reconstruction on hand-made series: arrivals, requests, use relative to each pod's
start, each node's background, which pods move, and what is noted."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from extender.replay.facts import Facts, Trace
from extender.replay.model import Role
from extender.replay.reconstruct import (
    NON_ZERO_CPU,
    Selection,
    filled,
    reconstruct,
    use_step,
)
from tests.replay.series import STEP, WINDOW, Cluster, at, grid, matrix


def steady(value: float) -> Callable[[int], float | None]:
    return lambda k: value


def test_arrivals_requests_use_and_background() -> None:
    c = Cluster()
    # node-a: 4 cores at 50 %, of which the replayed pod uses 1 core from step 20 to 29.
    c.node("node-a", 4, lambda k: 0.5 if not 20 <= k < 30 else 0.75)
    c.pod(
        "web-1",
        "node-a",
        created=at(19.5),
        start=at(20),
        end=at(30),
        cpu=0.5,
        use=lambda k: 1.0 if 20 <= k < 30 else None,
    )
    history = reconstruct(c.facts, Selection())
    (pod,) = history.pods
    assert pod.role is Role.REPLAYED
    assert (pod.arrival, pod.start, pod.end) == (at(19.5), at(20), at(30))
    assert pod.cpu_milli == 500
    assert list(pod.usage) == [1.0] * 10
    assert use_step(pod, history.grid) == 20
    assert pod.workload == "deployment shop/web"
    node = history.nodes["node-a"]
    assert (node.first, node.last, node.cores) == (0, 39, 4)
    # What no scheduler replays: 2 cores throughout (3 while the pod ran, less its 1 core).
    assert all(math.isclose(b, 2.0) for b in node.background)


def test_use_relative_to_start_fills_the_rules_first_steps_and_gaps() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.5))
    measured = {22: 0.4, 23: 0.6, 25: 0.8}  # the rule shows the pod from step 22, a gap at 24
    c.pod("web-1", "node-a", created=at(20), end=at(27), use=measured.get)
    (pod,) = reconstruct(c.facts, Selection()).pods
    # Steps 20..26: the first two take its first value, step 24 the last one before it.
    assert list(pod.usage) == pytest.approx([0.4, 0.4, 0.4, 0.6, 0.6, 0.8, 0.8])


def test_roles() -> None:
    c = Cluster()
    c.node("node-a", 8, steady(0.3))
    c.pod("pending", None, created=at(12))
    c.pod("old", "node-a", created=at(5))  # before --from (step 10)
    c.pod("other", "node-a", created=at(12), scheduler="my-scheduler")
    c.pod("daemon", "node-a", created=at(12), owner=("daemonset", "agent"), created_by="DaemonSet")
    c.pod("static", "node-a", created=at(12), owner=None, created_by="Node")
    c.pod("selected", "node-a", created=at(12), selectors={"disk": "ssd"})
    c.pod("elsewhere", "node-a", created=at(12), namespace="batch")
    c.pod("web-1", "node-a", created=at(12), use=steady(0.1))
    selection = Selection(namespaces=frozenset({"shop"}))
    roles = {p.name: (p.role, p.why) for p in reconstruct(c.facts, selection).pods}
    assert roles == {
        "pending": (Role.NEVER_RAN, "Pending throughout"),
        "old": (Role.EARLIER, "created before --from"),
        "other": (Role.OTHER_SCHEDULER, "scheduler my-scheduler"),
        "daemon": (Role.PINNED, "DaemonSet"),
        "static": (Role.PINNED, "static pod"),
        "selected": (Role.PINNED, "nodeSelector disk"),
        "elsewhere": (Role.OUTSIDE, "namespace batch"),
        "web-1": (Role.REPLAYED, ""),
    }


def test_only_replayed_pods_leave_the_background() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.5))
    c.pod("old", "node-a", created=at(2), use=steady(1.0))  # keeps its node: stays inside
    c.pod("web-1", "node-a", created=at(12), end=at(20), use=steady(0.4))
    history = reconstruct(c.facts, Selection())
    background = history.nodes["node-a"].background
    assert background[11] == pytest.approx(2.0)
    assert [background[k] for k in range(12, 20)] == pytest.approx([1.6] * 8)
    assert background[20] == pytest.approx(2.0)


def test_times_when_kube_state_metrics_says_less() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.5))
    # No start time: its use begins at the first step the rule measured it.
    c.pod("web-1", "node-a", created=at(12), use=lambda k: 0.3 if k >= 15 else None)
    c.facts.pods[("shop", "web-1", "uid-web-1")].started = None
    # Completed at step 18: the end is the completion, whatever the rule says after it.
    c.pod("job-1", "node-a", created=at(12), end=at(18), completed=True, use=steady(0.2))
    # Still running when the range ends.
    c.pod("web-2", "node-a", created=at(13), use=steady(0.2))
    pods = {p.name: p for p in reconstruct(c.facts, Selection()).pods}
    assert pods["web-1"].start == at(15)
    assert pods["job-1"].end == at(18) and len(pods["job-1"].usage) == 6
    assert pods["web-2"].end == c.grid.end
    assert len(pods["web-2"].usage) == c.grid.steps - 13


def test_a_pod_requesting_nothing_counts_as_kube_schedulers_stand_in() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.5))
    c.pod("besteffort", "node-a", created=at(12), cpu=0.0, use=steady(0.1))
    c.facts.pods[("shop", "besteffort", "uid-besteffort")].memory = 0.0
    (pod,) = reconstruct(c.facts, Selection()).pods
    assert pod.cpu_milli == NON_ZERO_CPU


def test_measured_use_above_the_nodes_cpu_is_clamped_and_noted() -> None:
    c = Cluster()
    c.node("node-a", 2, steady(0.5))  # 1 core busy
    c.pod("hog", "node-a", created=at(12), end=at(14), use=steady(1.5))
    history = reconstruct(c.facts, Selection())
    assert history.nodes["node-a"].background[12] == 0.0
    assert any("2 node-steps" in note and "clamped" in note for note in history.notes)


def test_nodes_without_allocatable_or_cpu_are_left_out_with_a_note() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.5))
    c.node("node-b", 4, lambda k: None)
    c.facts.fold_node_cpu(
        [{"metric": {"node": "ghost"}, "values": [[at(3), "0.5"]]}], lambda lb: lb.get("node")
    )
    history = reconstruct(c.facts, Selection())
    assert set(history.nodes) == {"node-a"}
    assert any("node-b: no CPU values" in n for n in history.notes)
    assert any("ghost: CPU values but no allocatable CPU" in n for n in history.notes)


def test_a_node_that_joins_late_and_a_gap_in_its_cpu() -> None:
    c = Cluster()
    c.node("node-a", 4, lambda k: None if k < 8 or k == 20 else 0.25 + k / 100)
    node = reconstruct(c.facts, Selection()).nodes["node-a"]
    assert (node.first, node.last) == (8, 39)
    assert node.background[7] == 0.0
    assert node.background[20] == pytest.approx(node.background[19])  # carried forward


def test_duplicate_series_of_a_node_keep_the_highest_value() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.2))
    c.facts.fold_node_cpu(
        [{"metric": {"instance": "10.0.0.1:9100"}, "values": [[at(5), "0.9"]]}],
        lambda labels: "node-a",
    )
    node = reconstruct(c.facts, Selection()).nodes["node-a"]
    assert node.background[5] == pytest.approx(3.6)
    assert node.background[6] == pytest.approx(0.8)


def test_missing_inputs_are_noted() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.2))
    c.pod("web-1", "node-a", created=at(12), scheduler=None)
    notes = reconstruct(c.facts, Selection()).notes
    assert any(n.startswith("kube_pod_scheduler has no series") for n in notes)
    assert any(n.startswith("kube_pod_nodeselectors has no series") for n in notes)


def test_tolerations_keep_only_what_says_where_a_pod_may_go() -> None:
    c = Cluster()
    c.node("node-a", 4, steady(0.2))
    tolerations = [("node.kubernetes.io/not-ready", "NoExecute"), ("gpu", "NoSchedule")]
    c.pod("web-1", "node-a", created=at(12), tolerations=tolerations, use=steady(0.1))
    (pod,) = reconstruct(c.facts, Selection()).pods
    assert pod.tolerations == ("gpu:NoSchedule",)


def test_trace_grows_at_either_end() -> None:
    trace = Trace(10)
    trace.put(12, 1.0)
    trace.put(8, 2.0)
    assert trace.first == 8 and trace.last == 12
    assert [trace.at(k) for k in (8, 12)] == [2.0, 1.0]
    assert math.isnan(trace.at(10)) and math.isnan(trace.at(13))


def test_filled() -> None:
    nan = math.nan
    assert list(filled([nan, nan, 1.0, nan, 3.0, nan])) == [1.0, 1.0, 1.0, 1.0, 3.0, 3.0]
    assert list(filled([nan, nan])) == [0.0, 0.0]


@pytest.mark.parametrize(
    ("created", "windows", "end"),
    [
        # There since step 12; its series ends 4 scrapes into the window (600 s, 900 s].
        (at(12), [(at(20), 10), (at(30), 4)], at(24)),
        # Created and bound at step 21, inside its only window: 3 scrapes after its bind.
        (at(21), [(at(30), 3)], at(24)),
    ],
)
def test_a_deletion_no_scrape_caught_ends_where_its_samples_do(
    created: float, windows: list[tuple[float, float]], end: float
) -> None:
    facts = Facts(grid(), WINDOW, scrape=STEP)
    labels = {"namespace": "shop", "pod": "web-1", "uid": "u1"}
    facts.fold("pod_info", [matrix({**labels, "node": "node-a"}, windows)])
    for what in ("created", "started"):
        facts.fold(what, [matrix(labels, [(at(30), created)])])
    (pod,) = reconstruct(facts, Selection()).pods
    assert (pod.arrival, pod.end) == (created, end)


def test_a_pod_gone_in_the_window_that_reaches_past_the_range_is_not_still_there() -> None:
    facts = Facts(grid(steps=35), WINDOW, scrape=STEP)  # the window (30, 40] holds its end
    labels = {"namespace": "shop", "pod": "web-1", "uid": "u1"}
    facts.fold("pod_info", [matrix({**labels, "node": "node-a"}, [(at(30), 10), (at(40), 2)])])
    for what in ("created", "started"):
        facts.fold(what, [matrix(labels, [(at(40), at(12))])])
    facts.fold("pod_info", [matrix({**labels, "pod": "web-2", "uid": "u2", "node": "node-a"},
                                [(at(30), 10), (at(40), 4)])])  # fmt: skip
    for what in ("created", "started"):
        facts.fold(what, [matrix({**labels, "pod": "web-2", "uid": "u2"}, [(at(40), at(12))])])
    ends = {p.name: p.end for p in reconstruct(facts, Selection()).pods}
    assert ends == {"web-1": at(32), "web-2": at(35)}  # web-2 ran to the range's end


def test_node_addresses_count_as_seen() -> None:
    """kube_node_info answering is what the collector's presence check asks of it (with
    prometheus.nodeLabel: instance it is required)."""
    facts = Facts(grid(), WINDOW, scrape=STEP)
    facts.fold("node_info", [matrix({"node": "node-a"}, [(at(1), 1)])])
    assert "node_info" not in facts.seen
    facts.fold("node_info", [matrix({"node": "node-a", "internal_ip": "10.0.0.1"}, [(at(1), 1)])])
    assert "node_info" in facts.seen and facts.ips == {"10.0.0.1": "node-a"}
