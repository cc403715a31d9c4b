"""The koordlet's NodeMetric: what Koordinator's scheduler knows of a node's load.

From koordinator-sh/koordinator pkg/koordlet/statesinformer/impl/states_nodemetric.go (and
pkg/util/sloconfig/colocation_config.go): every 60 s, the node's and each pod's mean use
over 300 s of its own samples (here the ledger's), stamped UpdateTime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.simulation.ledger import NodeLedger, PodMeter
from extender.simulation.workload import NodeSpec

REPORT_INTERVAL = 60
AGGREGATE_DURATION = 300


@dataclass(frozen=True, slots=True)
class NodeMetric:
    update_time: float | None
    cpu_milli: int = 0
    memory: int = 0
    pods: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    report_interval: float = REPORT_INTERVAL


EMPTY = NodeMetric(None)


def report(node: NodeSpec, t: float, now: float, ledger: NodeLedger, meter: PodMeter) -> NodeMetric:
    tick = ledger.tick
    end = round(t / tick)
    start = end - math.ceil(AGGREGATE_DURATION / tick)
    cpu = ledger.cpu(node.name, start, end)
    memory = ledger.memory(node.name, start, end)
    pods = {}
    for uid, entry in meter.on_node.get(node.name, {}).items():
        use = meter.average(entry, t, AGGREGATE_DURATION)
        if use is not None:
            pods[uid] = (int(use * 1000), entry.pod.memory)
    used = int((cpu or 0.0) * node.cores * 1000), int((memory or 0.0) * node.memory)
    return NodeMetric(now, *used, pods)


class Koordlets:
    def __init__(self) -> None:
        self.metrics: dict[str, NodeMetric] = {}

    def observe(
        self,
        t: float,
        now: float,
        nodes: Mapping[str, NodeSpec],
        ledger: NodeLedger,
        meter: PodMeter,
    ) -> bool:
        """True when the NodeMetrics changed (a report round, or a node joined)."""
        changed = False
        for name in nodes:
            if name not in self.metrics:
                self.metrics[name] = EMPTY
                changed = True
        if t % REPORT_INTERVAL == 0:
            for name, node in nodes.items():
                if ledger.cpu(name, 0, round(t / ledger.tick)) is not None:
                    self.metrics[name] = report(node, t, now, ledger, meter)
            changed = True
        return changed
