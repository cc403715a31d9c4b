"""The koordlet's NodeMetric: what Koordinator's scheduler knows of a node's load.

Read, not copied, from koordinator-sh/koordinator (master, 2026-07):

- pkg/koordlet/statesinformer/impl/states_nodemetric.go: every report interval the
  koordlet writes the node's NodeMetric status: NodeUsage is the AVG of its own CPU and
  memory samples over the last aggregate duration, each pod's PodUsage the AVG of that
  pod's samples over the same span (a pod that started inside it is averaged over the
  samples it has), UpdateTime the report's time. Defaults: defaultReportIntervalSeconds 60,
  defaultAggregateDurationSeconds 300 (also pkg/util/sloconfig/colocation_config.go's
  MetricReportIntervalSeconds and MetricAggregateDurationSeconds).
- The koordlet samples the node and the pods' cgroups itself (every CollectResUsedInterval,
  1 s): it does not go through Prometheus, so its input here is the ledger of what ran,
  sampled every tick (ledger.NodeLedger, ledger.PodMeter.average).
- Before the first report a node's NodeMetric has no UpdateTime (the slo-controller creates
  it when the node joins).

The reports of every node are aligned at 0 like the rest of the simulation's clocks.
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
    """None until the koordlet's first report."""
    cpu_milli: int = 0
    memory: int = 0
    pods: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """uid -> (millicores, bytes) of each pod the report covers."""
    report_interval: float = REPORT_INTERVAL


EMPTY = NodeMetric(None)


def report(node: NodeSpec, t: float, now: float, ledger: NodeLedger, meter: PodMeter) -> NodeMetric:
    """The node's NodeMetric status written at `t` (`now` on the engine's clock)."""
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
    return NodeMetric(
        now,
        int((cpu or 0.0) * node.cores * 1000),
        int((memory or 0.0) * node.memory),
        pods,
    )


class Koordlets:
    """Every node's koordlet: the NodeMetrics the scheduler's informer holds."""

    def __init__(self) -> None:
        self.metrics: dict[str, NodeMetric] = {}
        self.generation = 0
        """Bumped at every report round: the scheduler's caches recompute."""

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
        if changed:
            self.generation += 1
        return changed
