"""prioritize.shortlist: the filter passes only our best K nodes, so kube-scheduler scores K."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from extender.decisions.engine import Engine
from extender.decisions.explain import explain_pod
from extender.decisions.pods import prefers_nodes
from extender.decisions.scoring import tie_start
from extender.decisions.shortlist import shortlist, shortlist_size
from extender.decisions.wire import encode_filter, parse_extender_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot

# -- the pure cut -----------------------------------------------------------------------------

RANKING = [(-9, "a"), (-9, "c"), (-5, "b"), (-5, "e"), (-5, "f"), (-1, "d")]


def test_whole_levels_first_then_the_cut_level_from_the_pods_start() -> None:
    # a, c (9) whole; then 2 of b, e, f (5), from tie_start(uid, 3) on, wrapping.
    for uid in ("u", "v", "w", "x"):
        start = tie_start(uid, 3)
        tied = ["b", "e", "f"]
        expected = ["a", "c", tied[start], tied[(start + 1) % 3]]
        assert sorted(shortlist(RANKING, 4, uid)[:2]) == ["a", "c"]
        assert shortlist(RANKING, 4, uid)[2:] == expected[2:]


def test_the_same_pod_gets_the_same_list_and_pods_spread_over_the_tie() -> None:
    assert shortlist(RANKING, 3, "u") == shortlist(RANKING, 3, "u")
    third = {shortlist(RANKING, 3, f"pod-{i}")[2] for i in range(50)}
    assert third == {"b", "e", "f"}  # every tied node gets some pods


@pytest.mark.parametrize(
    ("nodes", "share", "passing", "size"),
    [
        (200, 0.2, 1000, 200),  # 200 of 1,000: a fifth is 200, the floor 200
        (200, 0.2, 1001, 201),  # a fifth rounds up
        (200, 0.2, 5000, 1000),  # the share wins on big clusters
        (200, 0.2, 300, 200),  # the floor on small ones
        (200, 0.2, 200, None),  # nothing left out: no cut at all
        (200, 0.2, 150, None),
        (10, 1.0, 50, None),  # share 1: every passing node
    ],
)
def test_shortlist_size(nodes: int, share: float, passing: int, size: int | None) -> None:
    assert shortlist_size(nodes, share, passing) == size


@pytest.mark.parametrize("keep", [6, 7, 100])
def test_keep_at_least_the_ranking_takes_every_node(keep: int) -> None:
    assert sorted(shortlist(RANKING, keep, "u")) == ["a", "b", "c", "d", "e", "f"]


@pytest.mark.parametrize("seed", range(20))
def test_the_slices_for_every_node_give_what_the_test_per_node_gives(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"node-{i}" for i in range(rng.randint(1, 60))]
    ranking = sorted((-rng.randint(0, 10), n) for n in names)
    for keep in (1, 3, 7, 20, 59):
        uid = f"pod-{rng.random()}"
        fast = shortlist(ranking, keep, uid)
        assert sorted(fast) == sorted(shortlist(ranking, keep, uid, asked=set(names)))
        assert len(fast) == min(keep, len(names)) == len(set(fast))


def test_only_asked_nodes_and_never_skipped_ones() -> None:
    got = shortlist(RANKING, 3, "u", asked={"a", "b", "d", "e"}, skip={"a"})
    assert sorted(got) == ["b", "d", "e"]  # a skipped, c not asked: fewer than 3 above d
    assert shortlist(RANKING, 2, "u", asked={"d"}) == ["d"]
    assert shortlist([], 3, "u") == []


# -- the pod's own preferences ----------------------------------------------------------------

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize(
    ("spec", "prefers"),
    [
        ({}, False),
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}}, False),
        ({"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 1}]}}}, True),
        ({"affinity": {"podAffinity": {PREFERRED: [{"weight": 1}]}}}, True),
        ({"affinity": {"podAntiAffinity": {PREFERRED: [{"weight": 1}]}}}, True),
        ({"affinity": {"podAntiAffinity": {PREFERRED: []}}}, False),
        ({"topologySpreadConstraints": [{"whenUnsatisfiable": "DoNotSchedule"}]}, False),
        ({"topologySpreadConstraints": [{"whenUnsatisfiable": "ScheduleAnyway"}]}, True),
        ({"affinity": "junk", "topologySpreadConstraints": ["junk", 3]}, False),
        ({"affinity": {"nodeAffinity": []}}, False),
    ],
)
def test_prefers_nodes(spec: dict[str, Any], prefers: bool) -> None:
    assert prefers_nodes(spec) is prefers


# -- through the engine and the wire, as served -----------------------------------------------

NODES = 30
SMALL = 0.01  # the share: below any `keep` here, so `keep` is the size
CPU = {f"n{i:02d}": (i % 10) / 10 for i in range(NODES)}  # scores 10..1, three nodes each


def engine(keep: int | None = 5, **policy: Any) -> Engine:
    settings = make_settings(
        static={"nodes": {n: {"cpu": v} for n, v in CPU.items()}},
        metrics=[{"name": "cpu", "filter": {"above": 0.85}}],
        prioritize={"shortlist": None if keep is None else {"nodes": keep, "share": SMALL}},
        **policy,
    )
    return Engine(settings, make_snapshot({"cpu": CPU}), NOW)


def filter_body(names: list[str], uid: str = "u", **spec: Any) -> bytes:
    pod = {"metadata": {"name": "p", "uid": uid}, "spec": {"schedulerName": "decice_sched", **spec}}
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def filtered(e: Engine, names: list[str], uid: str = "u", **spec: Any) -> dict[str, Any]:
    args = parse_extender_args(filter_body(names, uid, **spec))
    answer: dict[str, Any] = orjson.loads(encode_filter(args, e.filter(args, NOW)))
    return answer


def test_the_filter_passes_the_best_k_and_says_nothing_of_the_rest() -> None:
    answer = filtered(engine(5), sorted(CPU))
    # cpu 0.0 (score 10: n00, n10, n20) whole, then 2 of the three at 0.1 (score 9)
    assert set(answer["NodeNames"]) >= {"n00", "n10", "n20"}
    assert len(answer["NodeNames"]) == 5
    assert set(answer["NodeNames"]) - {"n00", "n10", "n20"} <= {"n01", "n11", "n21"}
    # only the nodes above 0.85 carry a reason; the others are merely not shortlisted
    assert set(answer["FailedAndUnresolvableNodes"]) == {"n09", "n19", "n29"}
    assert answer["FailedNodes"] == {}


def test_off_or_enough_room_passes_every_node_that_passes() -> None:
    passing = sorted(n for n, v in CPU.items() if v <= 0.85)
    assert sorted(filtered(engine(None), sorted(CPU))["NodeNames"]) == passing
    assert sorted(filtered(engine(len(passing)), sorted(CPU))["NodeNames"]) == passing


def test_a_subset_asked_is_cut_from_itself() -> None:
    asked = [f"n{i:02d}" for i in range(5, 15)]  # cpu .5 .6 .7 .8 .9 .0 .1 .2 .3 .4
    assert sorted(filtered(engine(3), asked)["NodeNames"]) == ["n10", "n11", "n12"]


def test_a_node_without_data_always_passes_beside_the_best() -> None:
    # fail-open: the new node passes, and the shortlist narrows only the measured nodes
    asked = ["n04", "n06", "new", "n05"]
    assert sorted(filtered(engine(1), asked)["NodeNames"]) == ["n04", "new"]


def test_a_pod_that_weighs_nodes_itself_gets_every_passing_node() -> None:
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
    answer = filtered(engine(5), sorted(CPU), topologySpreadConstraints=spread)
    assert len(answer["NodeNames"]) == NODES - 3


def test_a_share_of_the_passing_nodes_when_that_is_more() -> None:
    e = Engine(
        make_settings(
            static={"nodes": {n: {"cpu": v} for n, v in CPU.items()}},
            metrics=[{"name": "cpu", "filter": {"above": 0.85}}],
            prioritize={"shortlist": {"nodes": 2, "share": 0.5}},
        ),
        make_snapshot({"cpu": CPU}),
        NOW,
    )
    assert len(filtered(e, sorted(CPU))["NodeNames"]) == 14  # half of the 27 passing, up


def test_the_shipped_default_is_a_fifth_and_at_least_200() -> None:
    rule = make_settings().prioritize.shortlist
    assert rule is not None and (rule.nodes, rule.share) == (200, 0.2)


def test_the_explanation_remembers_the_cut() -> None:
    e = engine(5)
    filtered(e, sorted(CPU))
    memo = e.pods.get("u")
    assert memo is not None and memo.shortlisted == 5
    filtered(e, ["n00", "n01"])
    memo = e.pods.get("u")
    assert memo is not None and memo.shortlisted is None


def test_full_nodes_requests_are_cut_too() -> None:
    e = engine(2)
    items = [{"metadata": {"name": n}} for n in ["n05", "n00", "n10", "n01"]]
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"schedulerName": "decice_sched"}}
    raw = orjson.dumps({"Pod": pod, "Nodes": {"items": items}, "NodeNames": None})
    args = parse_extender_args(raw)
    answer = orjson.loads(encode_filter(args, e.filter(args, NOW)))
    assert [i["metadata"]["name"] for i in answer["Nodes"]["items"]] == ["n00", "n10"]


def test_pods_of_a_burst_spread_over_the_tied_nodes() -> None:
    e = engine(4)  # the 3 at score 10 whole, then 1 of the 3 at 9
    fourth = set()
    for i in range(40):
        names = set(filtered(e, sorted(CPU), uid=f"pod-{i}")["NodeNames"])
        fourth |= names - {"n00", "n10", "n20"}
    assert fourth == {"n01", "n11", "n21"}


def test_explain_says_the_pod_was_shortlisted() -> None:
    e = engine(5)
    filtered(e, sorted(CPU))
    memo = e.pods.get("u")
    assert memo is not None
    doc = explain_pod(e.settings, memo, NOW)
    assert doc["shortlisted"] == 5
    assert "best 5" in doc["shortlist"]
    filtered(e, ["n00", "n01"])
    memo = e.pods.get("u")
    assert memo is not None and "shortlisted" not in explain_pod(e.settings, memo, NOW)


def _one_name_at_a_time(
    ranking: list[tuple[int, str]], keep: int, uid: str, asked: set[str] | None, skip: set[str]
) -> list[str]:
    """The shortlist as it was first written: each level walked from the pod's start, one
    name at a time (the reference the comprehensions must match, order included)."""
    chosen: list[str] = []
    i = 0
    while i < len(ranking) and len(chosen) < keep:
        level_end = i
        while level_end < len(ranking) and ranking[level_end][0] == ranking[i][0]:
            level_end += 1
        size = level_end - i
        start = tie_start(uid, size)
        for j in range(size):
            name = ranking[i + (start + j) % size][1]
            if (asked is None or name in asked) and name not in skip:
                chosen.append(name)
                if len(chosen) == keep:
                    break
        i = level_end
    return chosen


@pytest.mark.parametrize("seed", range(30))
def test_the_levels_give_the_list_the_walk_a_name_at_a_time_gives(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"node-{i}" for i in range(rng.randint(1, 80))]
    ranking = sorted((-rng.randint(0, 10), n) for n in names)
    for keep in (1, 5, 20, 79):
        uid = f"pod-{rng.random()}"
        asked = set(rng.sample(names, rng.randint(0, len(names)))) if rng.random() < 0.7 else None
        skip = set(rng.sample(names, rng.randint(0, len(names) // 4)))
        expected = _one_name_at_a_time(ranking, keep, uid, asked, skip)
        assert shortlist(ranking, keep, uid, asked, skip) == expected
