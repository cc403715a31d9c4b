"""extender.cluster.nodewatch: what the node watch learns reaches the engine at once, not
at the next refresh: node sizes (the herd guard's share, so a preemption is judged on the
node's real cores), addresses, new and removed nodes (their reservations and table rows go).
Through Engine.nodes_changed; the watch itself runs in test_podwatch.py."""

from __future__ import annotations

from typing import Any

import orjson

from extender.cluster.nodewatch import NodeEventHandler
from extender.decisions.engine import Engine
from extender.decisions.model import NodeInfo
from extender.decisions.nodes import NodeCache
from extender.decisions.wire import PreemptionArgs, parse_preemption_args
from tests.harness.fixtures import NOW, make_settings, make_snapshot


def node(name: str, cpu: str, ip: str = "10.0.0.1", heartbeat: str = "t0") -> dict[str, Any]:
    """A v1.Node as the watch delivers it (the heartbeat changes at every kubelet update)."""
    return {
        "metadata": {"name": name, "resourceVersion": heartbeat},
        "status": {
            "allocatable": {"cpu": cpu},
            "addresses": [{"type": "InternalIP", "address": ip}],
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
        },
    }


class Rig:
    def __init__(self, values: dict[str, float]) -> None:
        settings = make_settings(
            metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
            herdGuard={"defaultNodeCores": 4},
        )
        self.engine = Engine(settings, make_snapshot({"cpu": values}), NOW)
        self.nodes = NodeCache()
        self.told: list[float] = []
        self.handler = NodeEventHandler(
            self.nodes, self.engine, changed=self.told.append, clock=lambda: NOW
        )


def preemptor_on(node: str, victims: list[str], cpu: str = "3") -> PreemptionArgs:
    pod = {
        "metadata": {"name": "urgent", "namespace": "ns", "uid": "u-urgent"},
        "spec": {
            "schedulerName": "decice_sched",
            "priority": 1000,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    meta = {node: {"Pods": [{"UID": uid} for uid in victims], "NumPDBViolations": 0}}
    return parse_preemption_args(orjson.dumps({"Pod": pod, "NodeNameToMetaVictims": meta}))


def test_a_new_nodes_size_reaches_the_preemption_judge_at_once() -> None:
    # The story: the service learned node-2 after its last refresh. Judged as a
    # 4-core node (defaultNodeCores), 0.3 measured + 3/4 for the preemptor > 0.9: refused.
    rig = Rig({"node-2": 0.3})
    assert rig.engine.reserve("filler", "node-2", 4.0, NOW, source="watch")
    refused = rig.engine.preempt(preemptor_on("node-2", ["filler"]), NOW)
    assert refused == {}

    rig.handler("ADDED", node("node-2", "8"))

    # Told at once: 0.3 + 3/8 = 0.675 once the filler leaves, so the node is kept.
    kept = rig.engine.preempt(preemptor_on("node-2", ["filler"]), NOW)
    assert list(kept) == ["node-2"]
    # The filler, and the preemptor, nominated to the one node /preempt kept.
    assert rig.engine.herd()["node-2"] == (4.0 + 3.0) / 8
    assert rig.told == [NOW]


def test_heartbeats_change_nothing_and_tell_nobody() -> None:
    rig = Rig({"node-1": 0.3})
    rig.handler("ADDED", node("node-1", "4"))
    for beat in ("t1", "t2", "t3"):
        rig.handler("MODIFIED", node("node-1", "4", heartbeat=beat))
    assert rig.told == [NOW]  # the ADDED only
    rig.handler("MODIFIED", node("node-1", "16", heartbeat="t4"))  # resized
    assert rig.told == [NOW, NOW]


def test_a_removed_node_takes_its_reservations_and_table_rows_with_it() -> None:
    rig = Rig({"node-1": 0.3, "node-2": 0.5})
    rig.handler.replace(
        [NodeInfo("node-1", ("10.0.0.1",), 4.0), NodeInfo("node-2", ("10.0.0.2",), 4.0)]
    )
    assert rig.engine.reserve("a", "node-1", 1.0, NOW, source="watch")
    assert rig.engine.reserve("b", "node-2", 1.0, NOW, source="watch")
    assert set(rig.engine.table(NOW).evals) == {"node-1", "node-2"}

    rig.handler("DELETED", node("node-2", "4", ip="10.0.0.2"))  # the autoscaler scaled down

    assert set(rig.engine.reservations) == {"a"}
    assert set(rig.engine.herd()) == {"node-1"}
    table = rig.engine.table(NOW)
    assert set(table.evals) == {"node-1"} and "node-2" not in table.scores
    assert "node-2" not in rig.engine.snapshot.metrics["cpu"].values


def test_a_list_that_lacks_a_node_removes_it() -> None:
    # After a 410 the node watch lists again: a node deleted meanwhile is not in the list.
    rig = Rig({"node-1": 0.3, "node-2": 0.5})
    rig.handler.replace([NodeInfo("node-1", (), 4.0), NodeInfo("node-2", (), 4.0)])
    assert rig.engine.reserve("b", "node-2", 1.0, NOW, source="watch")
    rig.handler.replace([NodeInfo("node-1", (), 4.0), NodeInfo("node-2", (), 4.0)])
    assert len(rig.told) == 1  # the same list again changes nothing
    rig.handler.replace([NodeInfo("node-1", (), 4.0)])
    assert not rig.engine.reservations
    assert set(rig.engine.table(NOW).evals) == {"node-1"}
    assert len(rig.told) == 2


def test_a_value_kept_under_an_address_counts_for_the_node_that_now_has_it() -> None:
    # The last refresh found a series whose `instance` address no node had yet (an
    # autoscaler's node, listed after it): kept under the address until a node has it.
    rig = Rig({"node-1": 0.3, "10.0.0.9": 0.95})
    assert "node-9" not in rig.engine.table(NOW).evals
    rig.handler("ADDED", node("node-9", "4", ip="10.0.0.9"))
    values = rig.engine.snapshot.metrics["cpu"].values
    assert values == {"node-1": 0.3, "node-9": 0.95}
    assert rig.engine.table(NOW).reasons["node-9"] == "decice: cpu above 0.9"
