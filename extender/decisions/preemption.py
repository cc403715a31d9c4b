"""Preemption: which of the scheduler's candidate nodes our filter would pass once the
victims are gone.

kube-scheduler finds victims by requests alone (its dry run, SelectVictimsOnNode, runs its
Filter plugins, never extenders) and asks /preempt with the victims it chose on each
candidate node. A node is judged as it will be after its victims leave:

- the herd guard's reservations of the victims come off (a burst placed them moments ago,
  so Prometheus does not show them yet: their whole expected use is reserved);
- the part of the victims' measured use that the node metric shows comes off too: a
  victim placed `settle` + t seconds ago shows t / window of its use in a rate over
  `window`, and the rest is still reserved (herd.unshown_share), so the two parts add up
  to its whole use, whatever its age. Measured use is the victim's own (Prometheus has a
  series for young pods) or its workload's quantile; a victim we know no measurement of
  takes off only its reservation: we never judge a node cooler than we can show;
- the preemptor's expected use (estimate.py) goes on, and the policy's filter is applied.

A node whose size the service does not know (the node watch has not listed it yet) is
judged on what Prometheus measures alone: every term above is a share of its cores, and a
veto resting on a guessed size is not ours to make (the scheduler's resource checks
stand; see DecisionState.sizes).

The scheduler asks our filter again for the preemptor a few milliseconds after it deleted
the victims: before our pod watch has seen them go. Judged on the table then, the chosen
node still carries the victims' reservations, the filter rejects it, and the scheduler
preempts on the next node, then the next (measured on the real chain: three fillers
evicted for one pod). So the victims of each node /preempt accepted are remembered for the
preemptor (`pods.Preemptions`), and its filter judges those nodes as /preempt did.
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


def load_after_victims(
    herd: HerdLedger, node: NodeName, uids: list[str], cores: float, shown: ShownUse
) -> float:
    """What the herd metric gains on `node` once `uids` leave and the preemptor (expected
    to use `cores`) arrives: reservations and the preemptor's share, less the victims'
    measured use the metric shows (so it may be below 0)."""
    size = herd.cores_of(node)
    load = herd.load_after(node, uids, cores)
    return load - sum(shown(uid, node) for uid in uids) / size


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
    `preemptor`: its UID: what it holds already (counted where it is nominated) is not
    counted twice."""
    if policy.herd_metric is None:  # no herd guard: the table's verdict is the whole story
        return {n: v for n, v in victims.items() if table.passes(n)}
    own = [preemptor] if preemptor else []
    kept: dict[NodeName, object] = {}
    for node, node_victims in victims.items():
        leaving = victim_uids(node_victims)
        load = load_after_victims(herd, node, leaving + own, cores, _victims_only(shown, own))
        verdict = evaluate_node(policy, snapshot, node, table.stale, {node: load}, now)
        if verdict.reason is None:
            kept[node] = node_victims
    return kept


def _victims_only(shown: ShownUse, own: list[str]) -> ShownUse:
    """`shown` for the victims; the preemptor (nominated, not running) shows nothing."""
    if not own:
        return shown
    return lambda uid, node: 0.0 if uid in own else shown(uid, node)
