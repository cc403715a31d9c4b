"""extender.decisions.shadow, .eligibility and Table.ranking: a placement judged against our
scores among the nodes the pod could have gone to (pure, table-driven)."""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from extender.decisions import table as table_module
from extender.decisions.model import NodeInfo, Taint
from extender.decisions.nodes import ANYWHERE, node_info, read_eligibility
from extender.decisions.shadow import Assignment, Judgement, ShadowLog, covers, judge
from extender.decisions.table import build_table, patch_table
from extender.policy.sections import ShadowSettings
from tests.harness.fixtures import NOW, make_settings, make_snapshot

# Scores with the range 0..1 "lower": 0.1 -> 9, 0.2 -> 8, ..., over 0.9 filtered.
CPU = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.5, "e": 0.7, "hot": 0.95}


def table(cpu: dict[str, float] | None = None) -> Any:
    settings = make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    policy = settings.default
    snapshot = make_snapshot({"cpu": cpu or CPU})
    return build_table(policy, snapshot, frozenset(), {}, NOW), policy, snapshot


def anywhere(node: str) -> bool:
    return True


def test_the_verdicts() -> None:
    t, _, _ = table()
    assert judge(t, "a", anywhere) == Judgement("best", 9, "a", 9, 0, None)
    assert judge(t, "c", anywhere).verdict == "top3"  # a 9, b 8, c 7
    other = judge(t, "e", anywhere)
    assert (other.verdict, other.gap, other.best) == ("other", 6, "a")
    hot = judge(t, "hot", anywhere)
    assert (hot.verdict, hot.reason) == ("rejected", "decice: cpu above 0.9")
    assert hot.gap == 9 - hot.chosen_score
    # A node the snapshot does not know passes (fail-open) with the neutral score.
    unknown = judge(t, "zz", anywhere)
    assert unknown.verdict == "other" and unknown.chosen_score == 5


def test_only_the_nodes_the_pod_could_go_to_count() -> None:
    t, _, _ = table()
    # The pod may not go to a or b (a nodeSelector, a taint): c is our best for it.
    allowed = {"c", "d", "e", "hot"}.__contains__
    assert judge(t, "c", allowed).verdict == "best"
    assert judge(t, "e", allowed).verdict == "top3"
    nowhere = judge(t, "d", lambda n: False)
    assert (nowhere.verdict, nowhere.best, nowhere.gap) == ("best", None, 0)


def test_ties_with_our_best_count_as_best() -> None:
    t, _, _ = table({"a": 0.1, "b": 0.1, "c": 0.5})
    assert judge(t, "b", anywhere).verdict == "best"


@hypothesis.given(
    st.lists(
        st.tuples(st.sampled_from(list(CPU)), st.floats(min_value=0, max_value=1.5)),
        max_size=30,
    )
)
def test_the_ranking_follows_every_patch(patches: list[tuple[str, float]]) -> None:
    t, policy, snapshot = table()
    assert list(t.ranking) == sorted((-s, n) for n, s in t.scores.items() if n in t.ok)
    herd: dict[str, float] = {}
    for node, load in patches:
        herd[node] = load
        t = patch_table(t, policy, snapshot, dict(herd), NOW, changed=(node,))
        fresh = sorted((-s, n) for n, s in t.scores.items() if n in t.ok)
        assert list(t.ranking) == fresh


@pytest.mark.parametrize("resort_above", [64, 2])  # node by node; sorted again
def test_a_patch_leaves_the_table_it_patched_as_it_was(
    resort_above: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_module, "RESORT_ABOVE", resort_above)
    t, policy, snapshot = table()
    before = list(t.ranking)
    many = {n: 0.5 for n in CPU}
    for changed in (("a",), tuple(CPU)):
        patched = patch_table(t, policy, snapshot, many, NOW, changed=changed)
        assert list(t.ranking) == before and patched.ranking != before
        assert list(patched.ranking) == sorted(
            (-s, n) for n, s in patched.scores.items() if n in patched.ok
        )


def node(name: str, labels: dict[str, str] | None = None, taints: list[Any] | None = None) -> Any:
    doc: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "spec": {}}
    if taints is not None:
        doc["spec"]["taints"] = taints
    return node_info(doc)


def test_node_selectors_and_tolerations() -> None:
    gpu = node("g", {"accelerator": "a100"})
    plain = node("p")
    tainted = node("t", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    soft = node("s", taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert ANYWHERE.allows(soft)  # only NoSchedule / NoExecute keep pods off
    assert tainted.taints == (Taint("dedicated", "db", "NoSchedule"),)

    selective = read_eligibility({"spec": {"nodeSelector": {"accelerator": "a100"}}})
    assert selective.allows(gpu) and not selective.allows(plain)
    assert ANYWHERE.allows(plain) and not ANYWHERE.allows(tainted)
    assert ANYWHERE.allows(None)  # a node we know nothing of: it may go there
    for toleration, ok in (
        ({"key": "dedicated", "operator": "Equal", "value": "db"}, True),
        ({"key": "dedicated", "value": "db", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "web"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # tolerates everything
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
    ):
        pod = {"spec": {"tolerations": [toleration]}}
        assert read_eligibility(pod).allows(tainted) is ok, toleration
    assert read_eligibility({"spec": {"tolerations": "bogus", "nodeSelector": 3}}) == ANYWHERE


def assignment(node: str, verdict: str, gap: int, reason: str | None = None) -> Assignment:
    j = Judgement(verdict, 9 - gap, "a", 9, gap, reason)  # type: ignore[arg-type]
    return Assignment("ns", f"p-{node}", "default", "default-scheduler", node, j, {"cpu": 0.5}, NOW)


def test_the_log_keeps_the_last_assignments_and_sums_them_up() -> None:
    log = ShadowLog(keep=4)
    for a in (
        assignment("a", "best", 0),
        assignment("b", "top3", 1),
        assignment("e", "other", 6),
        assignment("hot", "rejected", 9, "decice: cpu above 0.9"),
        assignment("hot", "rejected", 9, "decice: cpu above 0.9"),
    ):
        log.add(a)
    assert (log.seen, len(log)) == (5, 4)
    doc = log.summary({"cpu": 0.4})
    assert doc["verdicts"] == {"best": 0, "top3": 1, "other": 1, "rejected": 2}
    assert doc["agreement"] == 0 and doc["inTop3"] == 0.25
    assert doc["rejected"] == {"decice: cpu above 0.9": 2}
    assert doc["medianGap"] == 7.5
    assert doc["againstAdvice"] == [
        {"node": "hot", "placements": 2},
        {"node": "e", "placements": 1},
    ]
    assert doc["over"] == {"cpu": 1.0}
    assert ShadowLog(keep=3).summary()["agreement"] is None


def test_the_selection() -> None:
    pod = {
        "metadata": {"namespace": "web", "labels": {"app": "shop", "tier": "front"}},
        "spec": {"schedulerName": "default-scheduler"},
    }
    assert covers(ShadowSettings(), pod)
    assert covers(ShadowSettings(scheduler_names=("default-scheduler",)), pod)
    assert not covers(ShadowSettings(scheduler_names=("decice_sched",)), pod)
    assert not covers(ShadowSettings(namespaces=("batch",)), pod)
    chosen = ShadowSettings.model_validate(
        {"labelSelector": {"matchLabels": {"app": "shop"},
                           "matchExpressions": [{"key": "tier", "operator": "In",
                                                 "values": ["front"]}]}}
    )  # fmt: skip
    assert covers(chosen, pod)
    other = ShadowSettings.model_validate({"labelSelector": {"matchLabels": {"app": "db"}}})
    assert not covers(other, pod) and not covers(ShadowSettings(), "not a pod")
    assert NodeInfo("n").label_map == {}
