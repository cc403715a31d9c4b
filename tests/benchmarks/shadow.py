"""Shadow mode's cost per placement judged, on a 5,000-node cluster.

    python -m tests.benchmarks.shadow [--nodes 5000] [--assignments 5000] [--runs 3]

Drives the pod watch's handler (the path a watch event takes in `decice-extender shadow`:
the assignment read, judged against the table of that moment, recorded, remembered for
/explain, then counted by the herd guard, which re-scores its node) in this process, with
the shipped two-metric shape of policy and every pod selected. Pods carry a nodeSelector
a tenth of the time, so the ranking walk skips nodes. Prints assignments per second
(medians of `--runs`), asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import random
import statistics
import time
from typing import Any

from extender.cluster.podwatch import PodEventHandler
from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.nodes import NodeCache, node_info
from extender.policy.loading import parse_settings
from extender.service.shadow_mode import ShadowObserver

SEED = 7


class _Quiet:
    def judged(self, policy: str, verdict: str, gap: int, reason: str | None) -> None:
        pass


def _stamp(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(nodes: int, assignments: int, rng: random.Random) -> float:
    names = [f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal" for i in range(nodes)]
    now = 1_800_000_000.0
    settings = parse_settings(
        {
            "provider": "static",
            "static": {"nodes": {names[0]: {"cpu": 0.5, "memory": 0.5}}},
            "metrics": [
                {"name": "cpu", "weight": 2, "filter": {"above": 0.9}},
                {"name": "memory", "weight": 1},
            ],
            "shadow": {"keep": 10_000},
        }
    )
    values = {
        "cpu": {n: rng.uniform(0.1, 0.95) for n in names},
        "memory": {n: rng.uniform(0.2, 0.9) for n in names},
    }
    snapshot = Snapshot({m: MetricSeries(v, now) for m, v in values.items()}, now, 1)
    engine = Engine(settings, snapshot, now)
    cache = NodeCache()
    cache.replace(
        node_info(
            {
                "metadata": {"name": n, "labels": {"zone": f"z{i % 10}"}},
                "status": {"allocatable": {"cpu": "8"}},
            }
        )
        for i, n in enumerate(names)
    )
    observer = ShadowObserver(engine, cache, _Quiet())
    clock = [now]
    handler = PodEventHandler(engine, seen=observer, clock=lambda: clock[0])
    docs: list[dict[str, Any]] = []
    for i in range(assignments):
        spec: dict[str, Any] = {
            "schedulerName": "default-scheduler",
            "nodeName": rng.choice(names),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
        }
        if i % 10 == 0:
            spec["nodeSelector"] = {"zone": f"z{i % 7}"}
        docs.append(
            {
                "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}"},
                "spec": spec,
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "True",
                            "lastTransitionTime": _stamp(now),
                        }
                    ]
                },
            }
        )
    started = time.perf_counter()
    for doc in docs:
        handler("MODIFIED", doc)
    elapsed = time.perf_counter() - started
    assert observer.log.seen == assignments
    return assignments / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--assignments", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(SEED)
    rates = [run(args.nodes, args.assignments, rng) for _ in range(args.runs)]
    print(
        f"shadow: {args.assignments} placements judged on {args.nodes} nodes: "
        f"median {statistics.median(rates):,.0f}/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
    )


if __name__ == "__main__":
    main()
