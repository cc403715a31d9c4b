"""Preemption: which of the scheduler's candidate nodes our filter would pass once the
victims are gone.

kube-scheduler asks /preempt with the victims it chose on each candidate node. A node is
judged as it would be after its victims leave: the herd guard's reservations of the victims
are taken off (a burst placed them moments ago, so Prometheus does not show them yet), the
preemptor's expected use is added (estimate.py), and the policy's filter is applied to that. The
measured load stays: a node our filter rejects for what Prometheus measures stays rejected
whatever the victims (their usage leaves the metric only after they stop).

The scheduler asks our filter again for the preemptor a few milliseconds after it deleted
the victims: before our pod watch has seen them go. Judged on the table then, the chosen
node still carries the victims' reservations, the filter rejects it, and the scheduler
preempts on the next node, then the next (measured on the real chain: three fillers
evicted for one pod). So the victims of each node /preempt accepted are remembered for the
preemptor (`pods.Preemptions`), and its filter judges those nodes as /preempt did.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.decisions.herd import HerdLedger
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.scoring import evaluate_node
from extender.decisions.table import Table
from extender.policy.policies import Policy


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
) -> dict[NodeName, object]:
    """The scheduler's victims, exactly, for the nodes our filter passes after them."""
    if policy.herd_metric is None:  # no herd guard: the table's verdict is the whole story
        return {n: v for n, v in victims.items() if table.passes(n)}
    kept: dict[NodeName, object] = {}
    for node, node_victims in victims.items():
        load = herd.load_after(node, victim_uids(node_victims), cores)
        verdict = evaluate_node(policy, snapshot, node, table.stale, {node: load}, now)
        if verdict.reason is None:
            kept[node] = node_victims
    return kept
