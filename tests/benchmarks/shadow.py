"""Shadow mode's cost per placement judged, on a 5,000-node cluster; and the cost of the
exceedance watch per snapshot installed, on a 15,000-node one.

    python -m tests.benchmarks.shadow [--nodes 5000] [--assignments 5000] [--runs 3]
        [--install-nodes 15000] [--waiting 10000] [--installs 20]

Drives the pod watch's handler (the path a watch event takes in `decice-extender shadow`:
the assignment read, judged against the table of that moment, recorded, remembered for
/explain, then counted by the herd guard, which re-scores its node) in this process, with
the shipped two-metric shape of policy and every pod selected. Pods carry a nodeSelector
a tenth of the time, so the ranking walk skips nodes. Prints assignments per second
(medians of `--runs`), asserts nothing.

Then the exceedance watch (decisions.shadow) as the refresher's install hook calls it:
`--waiting` placements (shadow.keep's default) waiting on random nodes of
`--install-nodes`, and `--installs` snapshots, each with fresh values: all under the
threshold (the steady case: every node with a placement waiting looked up, none settled),
and a twentieth of the nodes over it (those nodes' placements settle, new ones replace
them). Prints the median milliseconds per install.
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
from extender.decisions.shadow import Exceedances, Threshold
from extender.policy.loading import parse_settings
from extender.service.shadow_mode import ShadowObserver

SEED = 7


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
    observer = ShadowObserver(engine, cache, lambda policy, verdict, gap, reason: None)
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


def install_ms(nodes: int, waiting: int, installs: int, hot: float, rng: random.Random) -> float:
    """Median milliseconds of one snapshot install with `waiting` placements waiting and a
    share `hot` of the nodes over the threshold."""
    names = [f"node-{i}" for i in range(nodes)]
    threshold = Threshold("cpu", 0.9)
    ledger = Exceedances(keep=waiting)
    now = 1_800_000_000.0
    for _ in range(waiting):
        ledger.placed(rng.choice(names), "default", "best", threshold, now, 1e9)
    times = []
    for k in range(installs):
        now += 15
        values = {n: (0.95 if rng.random() < hot else 0.5) for n in names}
        snapshot = Snapshot({"cpu": MetricSeries(values, now)}, now, k)
        started = time.perf_counter()
        ledger.installed(snapshot)
        times.append(time.perf_counter() - started)
        while ledger.waiting < waiting:  # new placements take the settled ones' place
            ledger.placed(rng.choice(names), "default", "best", threshold, now + 1, 1e9)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--assignments", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--install-nodes", type=int, default=15_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--installs", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(SEED)
    rates = [run(args.nodes, args.assignments, rng) for _ in range(args.runs)]
    print(
        f"shadow: {args.assignments} placements judged on {args.nodes} nodes: "
        f"median {statistics.median(rates):,.0f}/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})"
    )
    for hot in (0.0, 0.05):
        ms = install_ms(args.install_nodes, args.waiting, args.installs, hot, rng)
        print(
            f"exceedance watch: one install, {args.waiting:,} placements waiting on "
            f"{args.install_nodes:,} nodes, {hot:.0%} of them over: median {ms:.2f} ms"
        )


if __name__ == "__main__":
    main()
