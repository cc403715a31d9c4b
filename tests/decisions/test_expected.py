"""Expected pods in the herd guard (decisions.held.HeldPods.expect): without bindVerb the
scheduler's own binder binds, and the pod watch shows a Binding long after the scheduler
has decided the next pods of a burst. So a pod counts where we let it go as it is decided:
on the one node the filter passed it while earlier pods are unconfirmed, else on the node
our prioritize answer ranks first; the watch (or a bind of ours) confirms or moves it; a
retry drops it, and so does `herdGuard.settle` without news. With bindVerb nothing is
expected: our bind says where each pod went."""

from __future__ import annotations

from typing import Any

import orjson

from extender.decisions.engine import Engine
from extender.decisions.wire import encode_filter, encode_priorities, parse_extender_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot

CPU = {"n1": 0.2, "n2": 0.5, "n3": 0.5}
NODES = ["n1", "n2", "n3"]
SETTLE = 45.0
GUARD = {"settle": SETTLE, "window": 60, "estimate": "request"}


def engine(*, bind: bool = False) -> Engine:
    settings = make_settings(
        metrics=[{"name": "cpu", "filter": {"above": 0.85}}],
        herdGuard=GUARD,
        bind={"enabled": bind},
    )
    e = Engine(settings, make_snapshot({"cpu": CPU}), NOW)
    e.set_node_cores(dict.fromkeys(NODES, 4.0))
    return e


def body(name: str, cpu: str = "400m", names: list[str] = NODES) -> bytes:
    pod = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {
            "schedulerName": "decice_sched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    return orjson.dumps({"Pod": pod, "NodeNames": names})


def filtered(e: Engine, name: str, now: float = NOW) -> list[str]:
    args = parse_extender_args(body(name))
    kept: list[str] = orjson.loads(encode_filter(args, e.filter(args, now)))["NodeNames"] or []
    return kept


def scores(e: Engine, name: str, names: list[str], now: float = NOW) -> dict[str, int]:
    args = parse_extender_args(body(name, names=names))
    answer: list[dict[str, Any]] = orjson.loads(encode_priorities(e.prioritize(args, now)))
    return {h["Host"]: h["Score"] for h in answer}


def held(e: Engine) -> dict[str, tuple[str, str]]:
    return {uid: (r.node, r.source) for uid, r in e.reservations.items()}


def test_a_burst_without_bind_fills_the_nodes_to_the_level() -> None:
    """The e2e story's burst (tests/e2e/test_burst_without_bind.py), decided before any
    watch event: the first pod is scored and expected on n1, every later one is passed
    only the node it is counted on. 6/3/3 is the level (0.8 everywhere)."""
    e = engine()
    assert filtered(e, "p00") == NODES  # nothing unconfirmed: every node goes to scoring
    assert scores(e, "p00", NODES) == {"n1": 8, "n2": 5, "n3": 5}
    assert held(e) == {"u-p00": ("n1", "expected")}
    placed = ["n1"]
    for i in range(1, 12):
        [node] = filtered(e, f"p{i:02d}")
        placed.append(node)
    assert {n: placed.count(n) for n in NODES} == {"n1": 6, "n2": 3, "n3": 3}
    assert all(source == "expected" for _, source in held(e).values())
    # A 13th pod fits nowhere (0.9 past 0.85 on every node): it waits for room.
    assert filtered(e, "p12") == []


def test_the_watch_confirms_an_expected_pod_or_moves_it() -> None:
    e = engine()
    scores(e, "a", NODES)  # expected on n1
    load = e.herd()["n1"]
    assert e.reserve("u-a", "n1", 0.4, NOW + 0.2, source="watch")
    assert held(e) == {"u-a": ("n1", "watch")}
    assert abs(e.herd()["n1"] - load) < 1e-12  # the same load, now a bound pod's
    assert e.reservations["u-a"].bound_at == NOW + 0.2
    assert not e.unconfirmed

    scores(e, "b", NODES)
    expected_on = e.reservations["u-b"].node
    elsewhere = next(n for n in NODES if n != expected_on)
    e.reserve("u-b", elsewhere, 0.4, NOW + 0.2, source="watch")
    assert held(e)["u-b"] == (elsewhere, "watch")
    assert e.herd().get(expected_on, 0.0) == (load if expected_on == "n1" else 0.0)


def test_a_retry_drops_its_own_expectation_and_settle_ends_one_no_bind_followed() -> None:
    e = engine()
    scores(e, "a", NODES)
    assert "u-a" in e.reservations
    # Scheduled again (its bind failed): judged without what we expected of it.
    assert filtered(e, "a", NOW + 1) == NODES
    assert "u-a" not in e.reservations
    scores(e, "a", NODES, NOW + 1)
    assert e.reservations["u-a"].source == "expected"
    # No bind, no watch event: gone once herdGuard.settle has passed.
    filtered(e, "other", NOW + 1 + SETTLE)
    assert "u-a" not in e.reservations


def test_a_nomination_replaces_an_expectation() -> None:
    e = engine()
    scores(e, "a", NODES)
    pod = e.pods.get("u-a")
    assert pod is not None
    assert e.nominate("u-a", "n2", pod.facts, NOW + 0.1)
    assert held(e) == {"u-a": ("n2", "nominated")}
    assert not e.unconfirmed


def test_with_bind_verb_nothing_is_expected() -> None:
    e = engine(bind=True)
    scores(e, "a", NODES)
    assert e.reservations == {}
    assert filtered(e, "b") == NODES
