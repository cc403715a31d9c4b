"""extender.decisions.engine: the decisions for filter, prioritize and preempt (wire.py
encodes them)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import hypothesis
import orjson
from hypothesis import strategies as st

from extender.decisions.engine import Engine
from extender.decisions.usage import UsageTable, WorkloadKey, WorkloadUse
from extender.decisions.wire import encode_priorities, parse_extender_args, parse_preemption_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot

CPU = {"a": 0.2, "b": 0.95, "c": 0.5}


def engine(**policy: Any) -> Engine:
    raw: dict[str, Any] = {"metrics": [{"name": "cpu", "filter": {"above": 0.9}}]}
    raw.update(policy)
    return Engine(make_settings(**raw), make_snapshot({"cpu": CPU}), NOW)


def args(names: list[str], scheduler: str = "decice_sched", cpu: str = "500m") -> bytes:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    return orjson.dumps({"Pod": pod, "NodeNames": names, "Nodes": None})


def test_filter_decides_the_failed_nodes_and_remembers_the_pod() -> None:
    e = engine()
    decision = e.filter(parse_extender_args(args(["a", "b", "c", "zz"])), NOW)
    assert decision.failed == {"b": "decice: cpu above 0.9"}
    memo = e.pods.get("u-1")
    assert memo is not None and memo.rejected == {"b"}
    assert memo.candidates == ("a", "b", "c", "zz")
    assert memo.facts.cpu_request == 0.5


def test_filter_passes_every_node_for_pods_that_are_not_ours() -> None:
    e = engine()
    decision = e.filter(parse_extender_args(args(["a", "b"], scheduler="other")), NOW)
    assert decision.failed == {}
    assert e.pods.get("u-1") is None


def test_prioritize_uses_the_precomputed_fragments_on_the_fast_path() -> None:
    e = engine()
    names = ["c", "a", "zz"]
    out = e.prioritize(parse_extender_args(args(names)), NOW)
    assert out.fragments is not None and list(out.hosts) == names
    assert out.fragments["a"] == b'{"Host":"a","Score":8}'
    assert out.fragments["zz"] == b'{"Host":"zz","Score":5}'  # unknown: neutral, fail-open
    foreign = e.prioritize(parse_extender_args(args(names, scheduler="other")), NOW)
    assert encode_priorities(foreign) == b"[]"  # every host scores 0: none needs saying


def test_prioritize_answers_the_precomputed_whole_when_asked_about_every_passing_node() -> None:
    e = engine()
    request = parse_extender_args(args(["c", "a"]), e.answered_nodes(NOW))  # b is rejected
    out = e.prioritize(request, NOW)
    assert out.whole is e.table(NOW).whole.encoded()
    assert orjson.loads(encode_priorities(out)) == [
        {"Host": "a", "Score": 8},
        {"Host": "c", "Score": 5},
    ]


def scheduler_reads(answer: bytes, asked: list[str]) -> dict[str, int]:
    """What kube-scheduler makes of a prioritize answer (kubernetes
    pkg/scheduler/schedule_one.go, prioritizeNodes): a map by Host, looked up for each node
    it asked about, 0 when missing."""
    by_host = {p["Host"]: p["Score"] for p in orjson.loads(answer)}
    return {n: by_host.get(n, 0) for n in asked}


@hypothesis.given(
    cpu=st.dictionaries(
        st.sampled_from("abcdefgh"), st.sampled_from([0.0, 0.1, 0.5, 0.89, 0.95]), max_size=8
    ),
    asked=st.lists(st.sampled_from("abcdefghxy"), min_size=1, max_size=12),
    foreign=st.booleans(),
    max_hosts=st.sampled_from([None, 3, 50]),
)
def test_the_scheduler_reads_every_answer_as_the_one_host_per_name_answer(
    cpu: dict[str, float], asked: list[str], foreign: bool, max_hosts: int | None
) -> None:
    """Whichever path answers (whole, fragments, per request scores, not ours), every node
    asked about gets the score the table gives it, or 0 for a pod that is not ours."""
    e = Engine(
        make_settings(
            metrics=[{"name": "cpu", "filter": {"above": 0.9}, "onMissing": "fail-open"}],
            prioritize={"maxHosts": max_hosts},
        ),
        make_snapshot({"cpu": cpu}),
        NOW,
    )
    body = args(asked, scheduler="other" if foreign else "decice_sched")
    request = parse_extender_args(body, e.answered_nodes(NOW))
    answer = encode_priorities(e.prioritize(request, NOW))
    table = e.table(NOW)
    expected = {n: 0 if foreign else table.scores.get(n, table.unknown_score) for n in asked}
    read = scheduler_reads(answer, asked)
    if max_hosts is None or len(asked) <= max_hosts:
        assert read == expected
    else:  # only the best maxHosts hosts are sent, each with its own score
        sent = {p["Host"] for p in orjson.loads(answer)}
        assert len(sent) <= max_hosts and all(read[n] == expected[n] for n in sent)
    assert len(orjson.loads(answer)) <= len(asked)  # never larger than the request


def test_prioritize_scores_per_request_for_max_hosts() -> None:
    e = engine(prioritize={"maxHosts": 2})
    out = e.prioritize(parse_extender_args(args(["b", "c", "a"])), NOW)
    assert out.fragments is None
    assert (list(out.hosts), list(out.scores)) == (["c", "a"], [5, 8])


def test_preempt_keeps_victims_on_the_nodes_the_filter_passes() -> None:
    e = engine()
    body = {
        "Pod": {"metadata": {"name": "p"}, "spec": {"schedulerName": "decice_sched"}},
        "NodeNameToMetaVictims": {
            "a": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 0},
            "b": {"Pods": [{"UID": "v2"}], "NumPDBViolations": 0},
        },
    }
    kept = e.preempt(parse_preemption_args(orjson.dumps(body)), NOW)
    assert set(kept) == {"a"}


def test_a_reservation_rescores_the_node_at_once() -> None:
    e = engine()
    before = e.table(NOW).scores["a"]
    assert e.reserve("u-9", "a", 2.0, NOW)  # 2 cores of a 4-core default node: +0.5
    assert e.table(NOW).scores["a"] < before
    assert not e.reserve("u-9", "a", 2.0, NOW)  # counted once per UID


def fit_error(num_nodes: int, reasons: dict[str, str]) -> str:
    """The FailedScheduling text kube-scheduler builds (FitError.Error): node reasons
    counted by exact text, "count reason" sorted as strings, joined by ", "."""
    histogram: dict[str, int] = {}
    for reason in reasons.values():
        histogram[reason] = histogram.get(reason, 0) + 1
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."


def test_reasons_aggregate_at_5000_nodes() -> None:
    """Every node has its own value, yet the rejected ones share a handful of reasons, so
    the pod's FailedScheduling event stays one short line."""
    names = [f"node-{i:04d}" for i in range(5000)]
    cpu = {n: 0.9001 + i * 0.00001 for i, n in enumerate(names[:4990])}  # all distinct
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.9}, "onMissing": "fail-closed"}]
    )
    e = Engine(settings, make_snapshot({"cpu": cpu}), NOW)
    decision = e.filter(parse_extender_args(args(names)), NOW)
    assert len(decision.failed) == 5000
    assert set(decision.failed.values()) == {"decice: cpu above 0.9", "decice: cpu data missing"}
    text = fit_error(5000, dict(decision.failed))
    assert text == (
        "0/5000 nodes are available: 10 decice: cpu data missing, 4990 decice: cpu above 0.9."
    )
    assert len(text.encode()) < 1024
    stale = Engine(settings, make_snapshot({"cpu": cpu}, fetched_at=NOW - 61), NOW)
    old = stale.filter(parse_extender_args(args(names)), NOW)
    assert set(old.failed.values()) == {"decice: cpu data older than 60s"}


def test_a_placed_pod_counts_at_its_workloads_measured_use() -> None:
    """A Deployment's pods request 100m and use ~1 core: the herd guard counts the next one
    at its siblings' p90, which /explain names."""
    web = WorkloadKey("ns", "deployment", "web")
    usage = UsageTable(workloads={web: WorkloadUse(1.0, 12)}, fetched_at=NOW)
    snapshot = replace(make_snapshot({"cpu": CPU}), usage=usage)
    e = Engine(make_settings(metrics=[{"name": "cpu"}]), snapshot, NOW)
    pod = {
        "metadata": {
            "name": "web-7f-x",
            "namespace": "ns",
            "uid": "u-web",
            "labels": {"pod-template-hash": "7f"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7f", "controller": True}],
        },
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }
    request = parse_extender_args(orjson.dumps({"Pod": pod, "NodeNames": ["a", "c"]}))
    e.filter(request, NOW)
    assert e.reserve("u-web", "a", 0.1, NOW)
    assert e.herd()["a"] == 1.0 / 4  # 1 core of a 4-core (default-sized) node, not 0.1
    assert e.guard.estimates == {"workload": 1}
    memo = e.pods.get("u-web")
    assert memo is not None
    assert memo.expected == "expects 1 core (p90 of 12 pods of deployment ns/web)"
    # a pod the filter never saw (a watch event after a restart) counts at its request
    assert e.reserve("u-other", "c", 0.5, NOW)
    assert e.herd()["c"] == 0.5 / 4 and e.guard.estimates["request"] == 1


def test_preempt_adds_the_preemptors_expected_use() -> None:
    """A 3-core preemptor fits node a (0.2 measured) once its victim leaves only if it is
    counted at its request; counted at what its workload uses (0.5 core), it fits anyway."""
    web = WorkloadKey("ns", "deployment", "web")
    e = engine()
    assert e.reserve("v1", "a", 3.0, NOW)  # a victim placed a moment ago
    pod = {
        "metadata": {
            "name": "web-1",
            "namespace": "ns",
            "uid": "u-pre",
            "labels": {"pod-template-hash": "9"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-9", "controller": True}],
        },
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
        },
    }
    body = {"Pod": pod, "NodeNameToMetaVictims": {"a": {"Pods": [], "NumPDBViolations": 0}}}
    by_request = e.preempt(parse_preemption_args(orjson.dumps(body)), NOW)
    assert by_request == {}  # 0.2 + 3/4 (the victim stays) + 3/4 > 0.9
    usage = UsageTable(workloads={web: WorkloadUse(0.5, 5)}, fetched_at=NOW)
    e.install(replace(make_snapshot({"cpu": CPU}), usage=usage), None, NOW)
    body["NodeNameToMetaVictims"] = {"a": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 0}}
    kept = e.preempt(parse_preemption_args(orjson.dumps(body)), NOW)
    assert set(kept) == {"a"}  # 0.2 + 0.5/4 once the victim leaves
