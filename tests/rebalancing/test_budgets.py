"""extender.rebalancing.budgets: which pods the Eviction API would refuse now,
known before asking, and how long a refused pod waits (pure)."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from extender.decisions.labels import selects
from extender.decisions.pods import PodFacts
from extender.rebalancing.budgets import Budgets, RefusalBackoff, read_budget
from extender.rebalancing.pods import RunningPod
from tests.harness.fixtures import APISERVER, NOW


def pod(name: str, labels: dict[str, str], namespace: str = "decice") -> RunningPod:
    facts = PodFacts(f"uid-{name}", name, namespace, "decice_sched", 0.5, "node-2")
    return RunningPod(facts, "ReplicaSet", NOW - 3600, labels=labels)


def budget(
    name: str,
    selector: dict[str, Any] | None,
    allowed: int,
    *,
    namespace: str = "decice",
    generation: int = 1,
    observed: int = 1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 1}
    if selector is not None:
        spec["selector"] = selector
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": spec,
        "status": {"observedGeneration": observed, "disruptionsAllowed": allowed},
    }


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),  # empty: every pod of the namespace
        (None, {"app": "x"}, False),  # null: no pod
        ({"matchLabels": {"app": "x"}}, {"app": "x", "tier": "web"}, True),
        ({"matchLabels": {"app": "x"}}, {"app": "y"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
         {"app": "y"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}, {}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]},
         {"app": "x"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": ""}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False),
        ({"matchLabels": {"app": "x"},
          "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "x"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, {"app": "x"}, False),
    ],
)  # fmt: skip
def test_label_selectors_select_as_kubernetes_does(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selects(selector, labels) is expected


def test_the_captured_budget_list_reads_as_the_eviction_api_judges_it() -> None:
    # list-pdbs.json: "guarded" selects app=guarded and allows no disruption.
    docs = orjson.loads((APISERVER / "list-pdbs.json").read_bytes())["response"]["items"]
    budgets = Budgets(docs)
    assert budgets.hold(pod("w1", {"app": "guarded"})) == (
        "PodDisruptionBudget guarded allows no disruption now"
    )
    assert budgets.hold(pod("w2", {"app": "movable"})) is None
    assert budgets.hold(pod("w3", {"app": "guarded"}, namespace="other")) is None


def test_an_accepted_eviction_uses_one_allowed_disruption() -> None:
    budgets = Budgets([budget("web", {"matchLabels": {"app": "web"}}, 1)])
    first, second = pod("a", {"app": "web"}), pod("b", {"app": "web"})
    assert budgets.hold(first) is None
    budgets.evicted(first)
    assert budgets.hold(second) == "PodDisruptionBudget web allows no disruption now"


def test_unprocessed_and_overlapping_budgets_are_refused() -> None:
    unprocessed = Budgets([budget("web", {}, 3, generation=2, observed=1)])
    assert unprocessed.hold(pod("a", {})) == "PodDisruptionBudget web is not processed yet"
    both = Budgets([budget("b", {}, 1), budget("a", {"matchLabels": {"app": "web"}}, 1)])
    assert both.hold(pod("x", {"app": "web"})) == (
        "PodDisruptionBudgets a, b all select it (the Eviction API refuses)"
    )


def test_malformed_budgets_are_left_out() -> None:
    assert read_budget("x") is None
    assert read_budget({"metadata": {"name": "n"}}) is None  # no namespace
    assert read_budget(budget("n", {}, "two")) is None  # type: ignore[arg-type]
    assert Budgets(["x", None, budget("ok", {}, 0)]).hold(pod("a", {})) is not None


def test_a_refused_pod_waits_under_a_ceiling_doubling_up_to_ten_minutes() -> None:
    backoff = RefusalBackoff(first=60, rng=random.Random(3))
    assert backoff.hold("u", NOW) is None
    waits = [backoff.refused("u", "budget", NOW) for _ in range(6)]
    ceilings = [60, 120, 240, 480, 600, 600]
    assert waits[0] == 60  # the first refusal waits one interval exactly
    assert all(60 <= w <= c for w, c in zip(waits, ceilings, strict=True)), waits
    assert len(set(waits[1:])) == 5  # drawn, not the ceilings
    last = waits[-1]
    assert backoff.hold("u", NOW + last - 1) == "eviction refused (budget); next try in 1s"
    assert backoff.hold("u", NOW + last) is None
    backoff.forget("u")
    assert backoff.refused("u", "budget", NOW) == 60  # an accepted eviction starts afresh


def test_the_backoff_keeps_only_running_pods() -> None:
    backoff = RefusalBackoff(first=5)
    for uid in ("a", "b", "c"):
        backoff.refused(uid, "throttled", NOW)
    backoff.prune({"b", "zz"})
    assert len(backoff) == 1 and backoff.hold("b", NOW) is not None
