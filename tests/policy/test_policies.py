"""Named policies: the format, the pod's choice by annotation, one table per policy."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.decisions.engine import UNKNOWN_POLICY, Engine
from extender.decisions.state import build_tables
from extender.decisions.wire import encode_filter, parse_extender_args
from extender.policy.fields import ConfigError
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import build_service
from tests.harness.fixtures import NOW, make_snapshot, prioritize_answer

# Two workloads, two metrics each their own: web pods want idle CPU, batch pods free memory.
TWO: dict[str, Any] = {
    "provider": "static",
    "static": {"nodes": {"a": {"cpu": 0.1, "mem": 0.9}, "b": {"cpu": 0.9, "mem": 0.1}}},
    "bind": {"enabled": False},
    "defaultPolicy": "web",
    "policies": {
        "web": {"metrics": [{"name": "cpu", "filter": {"above": 0.95}}]},
        "batch": {"metrics": [{"name": "mem", "filter": {"above": 0.8}}]},
    },
}
VALUES = {"cpu": {"a": 0.1, "b": 0.9}, "mem": {"a": 0.9, "b": 0.1}}


def settings(**changes: Any) -> Settings:
    return parse_settings({**TWO, **changes})


def pod(policy: str | None = None, uid: str = "u1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": uid}
    if policy is not None:
        meta["annotations"] = {"decice.io/policy": policy}
    return {"metadata": meta, "spec": {"schedulerName": "decice_sched"}}


def body(pod_doc: dict[str, Any], names: list[str]) -> bytes:
    return orjson.dumps({"Pod": pod_doc, "NodeNames": names})


def engine(s: Settings | None = None) -> Engine:
    e = Engine(s or settings(), make_snapshot(VALUES), NOW)
    e.install(make_snapshot(VALUES), None, NOW)
    return e


def scores(answer: bytes) -> dict[str, int]:
    return {h["Host"]: h["Score"] for h in orjson.loads(answer)}


# -- the format ---------------------------------------------------------------------------------


def test_a_single_policy_file_is_one_policy_named_default() -> None:
    s = parse_settings({"metrics": [{"name": "cpu", "query": "q"}]})
    assert list(s.policy_map) == ["default"] and s.default.name == "default"
    assert s.default.herd_metric == "cpu"


def test_named_policies_resolve_with_their_own_herd_metric() -> None:
    s = settings(herdGuard={"metric": "cpu"})
    assert s.default.name == "web"
    assert s.policy_map["web"].herd_metric == "cpu"
    assert s.policy_map["batch"].herd_metric is None  # no cpu metric: not guarded
    assert [m.name for m in s.fetched_metrics] == ["cpu", "mem"]
    batch = settings(
        policies={**TWO["policies"], "batch": {**TWO["policies"]["batch"], "herdMetric": "mem"}}
    )
    assert batch.policy_map["batch"].herd_metric == "mem"


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"defaultPolicy": None}, "defaultPolicy: required with more than one policy"),
        ({"defaultPolicy": "gpu"}, "defaultPolicy: 'gpu' is not one of the policies"),
        ({"metrics": [{"name": "cpu"}]}, "give either top-level metrics (one policy) or policies"),
        ({"policies": {}}, "policies: must name at least one policy"),
        ({"policies": {"web": {"metrics": []}}}, "policies.web.metrics: must list at least one"),
        ({"policies": {"Web!": {"metrics": [{"name": "cpu"}]}}}, "policies.Web!"),
        (
            {"policies": {"web": {"metrics": [{"name": "cpu"}], "herdMetric": "mem"}}},
            "policies.web.herdMetric: 'mem' is not one of its metrics",
        ),
        ({"herdGuard": {"metric": "gpu"}}, "herdGuard.metric: 'gpu' is not one of the metrics"),
        (
            {"policies": {"web": {"metrics": [{"name": "cpu"}], "weight": 2}}},
            "policies.web.weight: unknown key",
        ),
    ],
)
def test_policy_problems_are_named_by_path(changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings(**changes)
    assert needle in str(info.value)


def test_one_metric_name_is_one_query_across_policies() -> None:
    raw: dict[str, Any] = {
        "policies": {
            "a": {"metrics": [{"name": "cpu", "query": "q1"}]},
            "b": {"metrics": [{"name": "cpu", "query": "q2", "weight": 3}]},
        },
        "defaultPolicy": "a",
    }
    with pytest.raises(ConfigError, match=r"policies\.b\.metrics\[0\]\(cpu\)\.query: differs"):
        parse_settings(raw)
    raw["policies"]["b"]["metrics"][0]["query"] = "q1"
    s = parse_settings(raw)  # same query, its own weight: fetched once, scored twice
    assert [m.name for m in s.fetched_metrics] == ["cpu"]
    assert s.policy_map["b"].metrics[0].weight == 3


def test_metric_paths_name_the_policy() -> None:
    assert [p for p, _ in settings().metric_paths()] == [
        "policies.web.metrics[0](cpu)",
        "policies.batch.metrics[0](mem)",
    ]


# -- the engine -------------------------------------------------------------------------------


def test_the_annotation_picks_the_policy_and_each_has_its_own_scores() -> None:
    e = engine()
    web = scores(prioritize_answer(e, parse_extender_args(body(pod(), ["a", "b"]))))
    batch = scores(prioritize_answer(e, parse_extender_args(body(pod("batch"), ["a", "b"]))))
    assert web["a"] > web.get("b", 0)  # idle CPU on a
    assert batch["b"] > batch.get("a", 0)  # free memory on b
    named_web = scores(prioritize_answer(e, parse_extender_args(body(pod("web"), ["a", "b"]))))
    assert named_web == web


def test_each_policy_filters_by_its_own_thresholds() -> None:
    e = engine()
    assert e.filter(parse_extender_args(body(pod(), ["a", "b"])), NOW).failed == {}
    failed = e.filter(parse_extender_args(body(pod("batch"), ["a", "b"])), NOW).failed
    assert failed == {"a": "decice: mem above 0.8"}


def test_an_unknown_policy_is_rejected_on_every_node_with_one_reason() -> None:
    e = engine()
    args = parse_extender_args(body(pod("gpu"), ["a", "b", "c"]))
    decision = e.filter(args, NOW)
    reason = UNKNOWN_POLICY.format("gpu")
    assert reason == 'decice: unknown policy "gpu"'
    assert decision.failed == {"a": reason, "b": reason, "c": reason}
    answer = orjson.loads(encode_filter(args, decision))
    assert not answer["NodeNames"]
    assert set(answer["FailedAndUnresolvableNodes"]) == {"a", "b", "c"}
    # prioritize and preempt never fail the scheduler: no scores, no victims.
    assert orjson.loads(prioritize_answer(e, args)) == []
    memo = e.pods.get("u1")
    assert memo is not None and memo.policy is None


def test_pods_of_other_schedulers_pass_whatever_they_name() -> None:
    e = engine()
    foreign = pod("gpu")
    foreign["spec"]["schedulerName"] = "default-scheduler"
    assert e.filter(parse_extender_args(body(foreign, ["a"])), NOW).failed == {}


def test_the_fast_prioritize_path_uses_the_pods_policy_table() -> None:
    e = engine()
    # The scheduler prioritizes the nodes our filter passed: both for web, b for batch.
    for policy, passed in ((None, ["a", "b"]), ("batch", ["b"])):
        args = parse_extender_args(body(pod(policy), passed), e.answered_nodes(NOW))
        table = e.table(NOW, e.policy_of(args.pod))
        assert args.exactly is table.whole.nodes  # the precomputed answer of that policy
        assert prioritize_answer(e, args) == table.whole.encoded()
    unknown = parse_extender_args(body(pod("gpu"), ["a", "b"]), e.answered_nodes(NOW))
    assert unknown.exactly is None or not unknown.exactly


def test_the_herd_guard_moves_only_the_policies_that_count_cpu() -> None:
    e = engine(settings(herdGuard={"metric": "cpu", "defaultNodeCores": 1}))
    before_batch = e.table(NOW, e.policies["batch"])
    e.reserve("x", "a", 0.5, NOW)
    assert e.table(NOW, e.policies["web"]).evals["a"].values[0] == pytest.approx(0.6)
    assert e.table(NOW, e.policies["batch"]) is before_batch  # untouched


def test_a_swap_replaces_every_table_between_requests() -> None:
    e = engine()
    old = e.table(NOW)
    swapped = settings(policies={"web": {"metrics": [{"name": "mem", "direction": "higher"}]}})
    e.install(e.snapshot, build_tables(swapped, e.snapshot, e.herd(), NOW), NOW, swapped)
    assert list(e.policies) == ["web"] and e.table(NOW) is not old
    web = scores(prioritize_answer(e, parse_extender_args(body(pod(), ["a", "b"]))))
    assert web["a"] > web.get("b", 0)  # now the node with most memory in use wins
    # A policy that went away is now unknown.
    gone = e.filter(parse_extender_args(body(pod("batch"), ["a"])), NOW).failed
    assert gone == {"a": UNKNOWN_POLICY.format("batch")}


# -- on the wire ------------------------------------------------------------------------------


def test_an_unknown_or_hostile_policy_name_is_a_200_with_a_short_reason() -> None:
    service = build_service(settings())
    hostile = "gpu\n\x1b[31m" + "x" * 10_000
    with TestClient(service.app) as client:
        for name, shown in (("gpu", "gpu"), (hostile, None)):
            r = client.post(
                "/filter",
                content=body(pod(name), ["a", "b"]),
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code == 200
            reasons = set(r.json()["FailedAndUnresolvableNodes"].values())
            [reason] = reasons  # one text for every node: one line in FailedScheduling
            assert reason.startswith('decice: unknown policy "') and len(reason) < 120
            assert "\n" not in reason and "\x1b" not in reason
            if shown is not None:
                assert reason == f'decice: unknown policy "{shown}"'
            r = client.post(
                "/prioritize",
                content=body(pod(name), ["a", "b"]),
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code == 200 and r.json() == []
