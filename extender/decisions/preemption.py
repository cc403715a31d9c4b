"""Preemption: which of the scheduler's candidate nodes our filter would pass once the
victims are gone (kube-scheduler picks them by requests alone: SelectVictimsOnNode runs
no extender).

A node is judged as it will be after its victims leave: their reservations and the part
of their measured use the metric shows come off (never more than we can show), the
preemptor's expected use goes on. The scheduler filters the preemptor again before our pod
watch has seen the victims go, so the accepted victims are remembered for it
(`pods.Preemptions`) and its filter judges those nodes as /preempt did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extender.decisions.herd import HerdLedger
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import evaluate_node
from extender.decisions.table import Table
from extender.policy.policies import Policy

ShownUse = Callable[[str, NodeName], float]
"""(victim UID, its node) -> cores of its measured use that the node metric shows now."""


def victim_uids(victims: object) -> list[str]:
    """The UIDs of one node's MetaVictims (`{"Pods": [{"UID": ...}], ...}`)."""
    pods = victims.get("Pods") if isinstance(victims, dict) else None
    return [p["UID"] for p in pods or () if isinstance(p, dict) and isinstance(p.get("UID"), str)]


def passing_after_victims(
    policy: Policy,
    table: Table,
    snapshot: Snapshot,
    herd: HerdLedger,
    victims: Mapping[NodeName, object],
    cores: float,
    now: float,
    shown: ShownUse = lambda uid, node: 0.0,
    preemptor: str | None = None,
) -> dict[NodeName, object]:
    """The scheduler's victims, exactly, for the nodes our filter passes after them.
    `preemptor`'s UID: what it holds already (where nominated) is not counted twice."""
    if policy.herd_metric is None:  # no herd guard: the table's verdict is the whole story
        return {n: v for n, v in victims.items() if table.passes(n)}
    own = [preemptor] if preemptor else []
    kept: dict[NodeName, object] = {}
    for node, node_victims in victims.items():
        leaving = victim_uids(node_victims)
        # Below 0 when the victims' shown use outweighs the preemptor's expected use.
        gone = sum(shown(uid, node) for uid in leaving if uid not in own) / herd.cores_of(node)
        load = herd.load_after(node, leaving + own, cores) - gone
        verdict = evaluate_node(policy, snapshot, node, table.stale, {node: load}, now)
        if verdict.reason is None:
            kept[node] = node_victims
    return kept
