"""What the per-node series (explain.nodeMetrics: decice_node_score, decice_node_metric)
cost a scrape of /metrics, by cluster size.

    python -m tests.benchmarks.nodeseries [--nodes 1000 5000 15000] [--runs 5]

The service's own registry (extender.service.telemetry.Telemetry) with the node collector
fed one policy and one metric (the shipped policy's shape), rendered as a scrape renders
it (prometheus_client's generate_latest), with and without the per-node series. Prints
the series, the bytes and the median milliseconds of one scrape; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import generate_latest

from extender.service.telemetry import Telemetry


def scrape(nodes: int, per_node: bool, runs: int) -> tuple[int, int, float]:
    """(per-node series, bytes, median ms) of one scrape."""
    telemetry = Telemetry(environ={})
    names = [f"node-{i:05d}" for i in range(nodes)]
    scores = {"default": {n: i % 11 for i, n in enumerate(names)}}
    values = {"cpu": {n: (i % 100) / 100 for i, n in enumerate(names)}}
    if per_node:
        telemetry.watch_nodes(lambda: (scores, values))
    times, body = [], b""
    for _ in range(runs):
        began = time.perf_counter()
        body = generate_latest(telemetry.registry)
        times.append(time.perf_counter() - began)
    series = body.count(b"\ndecice_node_score{") + body.count(b"\ndecice_node_metric{")
    return series, len(body), 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000, 15000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'nodes':>7} {'nodeMetrics':>11} {'series':>8} {'bytes':>10} {'ms/scrape':>10}")
    for nodes in args.nodes:
        for per_node in (False, True):
            series, size, ms = scrape(nodes, per_node, args.runs)
            print(f"{nodes:>7} {per_node!s:>11} {series:>8} {size:>10} {ms:>10.1f}")


if __name__ == "__main__":
    main()
