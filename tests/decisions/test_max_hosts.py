"""prioritize.maxHosts: answer only the best K nodes; the scheduler scores the rest 0."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from extender.decisions.engine import Engine
from extender.decisions.scoring import tie_start
from extender.decisions.wire import parse_extender_args
from extender.policy.fields import ConfigError
from extender.service.compose import build_service
from tests.harness.fixtures import NOW, make_settings, make_snapshot, prioritize_answer

# cpu, lower is better over 0..1: 0.1 -> 9, 0.5 -> 5, 0.9 -> 1.
CPU = {"d": 0.9, "b": 0.5, "a": 0.1, "e": 0.5, "c": 0.1}
ORDER = ["d", "b", "a", "e", "c"]  # scores 1, 5, 9, 5, 9 in request order


def engine(max_hosts: int | None, **policy: Any) -> Engine:
    settings = make_settings(
        static={"nodes": {n: {"cpu": v} for n, v in CPU.items()}},
        prioritize={"maxHosts": max_hosts},
        **policy,
    )
    return Engine(settings, make_snapshot({"cpu": CPU}), NOW)


def body(names: list[str], scheduler: str = "decice_sched") -> bytes:
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"schedulerName": scheduler}}
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def prioritize(e: Engine, names: list[str], scheduler: str = "decice_sched") -> list[Any]:
    args = parse_extender_args(body(names, scheduler), e.answered_nodes(NOW))  # as served
    answer: list[Any] = orjson.loads(prioritize_answer(e, args))
    return answer


def test_off_by_default_every_node_answered() -> None:
    # In any order: the scheduler reads the answer into a map by Host (kubernetes
    # pkg/scheduler/schedule_one.go, prioritizeNodes).
    answer = prioritize(engine(None), ORDER)
    assert {h["Host"]: h["Score"] for h in answer} == {"d": 1, "b": 5, "a": 9, "e": 5, "c": 9}
    assert len(answer) == 5


def test_best_k_in_request_order_ties_broken_by_request_order() -> None:
    # b and e tie at 5 for the third place: from pod "u"'s start (4, the end), b comes
    # first in the request.
    assert prioritize(engine(3), ORDER) == [
        {"Host": "b", "Score": 5},
        {"Host": "a", "Score": 9},
        {"Host": "c", "Score": 9},
    ]
    # The same nodes asked in another order: the tie goes the other way.
    assert [h["Host"] for h in prioritize(engine(3), ["e", "d", "c", "b", "a"])] == ["e", "c", "a"]


def test_k_of_one_keeps_a_best_node_tied_from_the_pods_own_start() -> None:
    # a and c tie at 9: pod "u" breaks ties from tie_start("u", 5) == 4 (c) on, every time
    assert tie_start("u", 5) == 4
    assert prioritize(engine(1), ORDER) == [{"Host": "c", "Score": 9}]
    assert prioritize(engine(1), ORDER) == [{"Host": "c", "Score": 9}]
    # another pod starting before a gets a: pods spread over the tied nodes
    other = next(f"u{i}" for i in range(100) if tie_start(f"u{i}", 5) <= 2)
    pod = {"metadata": {"name": "q", "uid": other}, "spec": {"schedulerName": "decice_sched"}}
    e = engine(1)
    raw = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": ORDER})
    answer = orjson.loads(prioritize_answer(e, parse_extender_args(raw, e.answered_nodes(NOW))))
    assert answer == [{"Host": "a", "Score": 9}]


@pytest.mark.parametrize("k", [5, 6, 1000])
def test_k_at_least_n_returns_all_exactly_as_without_it(k: int) -> None:
    args = parse_extender_args(body(ORDER))
    assert prioritize_answer(engine(k), args) == prioritize_answer(engine(None), args)


def test_unknown_nodes_take_the_unknown_score_and_can_be_cut() -> None:
    # "zz" is not in the snapshot: fail-open, so the neutral score 5, behind a and c.
    assert [h["Host"] for h in prioritize(engine(2), ["zz", "a", "c"])] == ["a", "c"]
    assert prioritize(engine(3), ["zz", "a"]) == [
        {"Host": "zz", "Score": 5},
        {"Host": "a", "Score": 9},
    ]


def test_with_a_candidates_metric() -> None:
    e = engine(2, metrics=[{"name": "cpu", "normalize": "candidates"}])
    # Rescaled over the request: a and c (least loaded) 10, b and e 5, d 0.
    assert prioritize(e, ORDER) == [{"Host": "a", "Score": 10}, {"Host": "c", "Score": 10}]


def test_foreign_pods_get_every_node_at_zero() -> None:
    # An empty answer: the scheduler scores each host missing from it 0 (prioritizeNodes).
    assert prioritize(engine(2), ORDER, scheduler="default-scheduler") == []


def test_bad_names_are_still_400_with_max_hosts() -> None:
    from extender.decisions.wire import WireError

    for names in ([1, "a"], ["a", ""], [["x"], "a"]):
        with pytest.raises(WireError):
            parse_extender_args(body(names))  # type: ignore[arg-type]


def test_through_http() -> None:
    service = build_service(engine(2).settings)
    with TestClient(service.app) as client:
        r = client.post(
            "/prioritize", content=body(ORDER), headers={"Content-Type": "application/json"}
        )
    assert r.status_code == 200
    assert r.json() == [{"Host": "a", "Score": 9}, {"Host": "c", "Score": 9}]
    assert r.headers["Server-Timing"].startswith("app;dur=")


@pytest.mark.parametrize("bad", [0, -1, "3", 2.5, True])
def test_max_hosts_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"prioritize\.maxHosts"):
        make_settings(prioritize={"maxHosts": bad})


def test_max_hosts_null_is_off() -> None:
    assert make_settings(prioritize={"maxHosts": None}).prioritize.max_hosts is None
    assert make_settings(prioritize={"maxHosts": 7}).prioritize.max_hosts == 7
