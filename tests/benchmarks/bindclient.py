"""CPU per Binding: our kept-alive connections against aiohttp, on the real API server.

    python -m tests.benchmarks.bindclient [--quick] [--binds 600] [--rounds 3] [--json FILE]

A real control plane (tests/harness/controlplane.py: etcd, kube-apiserver with TLS and
bearer tokens), 50 fake nodes, then per round and per client, interleaved (keepalive 1,
aiohttp 1, keepalive 2, ...): B pods created, then bound 4 at a time (the scheduler
pipelines its binds) from a fresh `KubeClient` in a fresh uvloop loop, 20 binds to warm
it first. Reported: this process's CPU (time.process_time: utime + stime) per bind, and
the wall time per round.

- `keepalive`: `KubeClient.bind`, as the service binds (extender.cluster.client.keepalive);
- `aiohttp`: the same Binding body through the transport's aiohttp path (the one a
  configured proxy takes), `KubeTransport._aiohttp_once`.

Printed: medians (min-max) per client and the ratio keepalive / aiohttp. `--quick` (20
binds, 1 round) is what test_bindclient_quick.py runs. Bounded: B binds a round, each with
the client's own timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvloop

from extender.cluster.client import KubeClient, load_api_client
from extender.cluster.client.binding import binding_body, binding_path
from tests.harness.controlplane import ControlPlane, fake_nodes, pod_manifest

CLIENTS = ("keepalive", "aiohttp")
NODES = 50
IN_FLIGHT = 4
WARM = 20
NAMESPACE = "binds"
RUN_KEYS = ("client", "round", "binds", "cpu_us_per_bind", "wall_s")


async def bind_all(client: KubeClient, how: str, pods: Sequence[tuple[str, str]]) -> None:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int, name: str, uid: str) -> None:
        node = f"node-{i % NODES + 1}"
        async with slots:
            if how == "keepalive":
                assert await client.bind(NAMESPACE, name, uid, node) == "bound"
                return
            body = binding_body(NAMESPACE, name, uid, node)
            status, _, answer = await client._aiohttp_once(
                "POST", binding_path(NAMESPACE, name), body, "application/json", None
            )
            assert status == 201, (status, answer[:200])

    await asyncio.gather(*(one(i, name, uid) for i, (name, uid) in enumerate(pods)))


def one_round(cp: ControlPlane, how: str, index: int, binds: int) -> dict[str, Any]:
    made = cp.kube.create_pods(
        NAMESPACE, [pod_manifest(f"{how}-{index}-{i}") for i in range(WARM + binds)]
    )
    pods = [(p["metadata"]["name"], p["metadata"]["uid"]) for p in made]
    configuration = load_api_client(str(cp.kubeconfig())).configuration

    async def go() -> tuple[float, float]:
        client = KubeClient(configuration)
        try:
            await bind_all(client, how, pods[:WARM])
            cpu, wall = time.process_time(), time.perf_counter()
            await bind_all(client, how, pods[WARM:])
            return time.process_time() - cpu, time.perf_counter() - wall
        finally:
            await client.close()

    cpu, wall = uvloop.run(go())
    return {
        "client": how,
        "round": index,
        "binds": binds,
        "cpu_us_per_bind": round(cpu / binds * 1e6, 1),
        "wall_s": round(wall, 3),
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for how in CLIENTS:
        values = [r["cpu_us_per_bind"] for r in runs if r["client"] == how]
        out[how] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
        }
    out["keepalive / aiohttp"] = round(out["keepalive"]["median"] / out["aiohttp"]["median"], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bindclient", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="20 binds, 1 round")
    p.add_argument("--binds", type=int, help="binds measured per round (default 600)")
    p.add_argument("--rounds", type=int, help="rounds per client (default 3)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    binds = args.binds or (20 if args.quick else 600)
    rounds = args.rounds or (1 if args.quick else 3)
    if binds < 1 or rounds < 1:
        p.error("--binds and --rounds must be at least 1")
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bindclient-") as work,
        ControlPlane(Path(work)) as cp,
    ):
        cp.kube.ensure_nodes(fake_nodes(NODES))
        cp.kube.create_namespace(NAMESPACE)
        for index in range(1, rounds + 1):
            for how in CLIENTS:
                row = one_round(cp, how, index, binds)
                runs.append(row)
                print(
                    f"{how} round {index}: {row['cpu_us_per_bind']} us CPU a bind, "
                    f"{row['wall_s']} s",
                    file=sys.stderr,
                    flush=True,
                )
    summary = summarize(runs)
    for how in CLIENTS:
        s = summary[how]
        print(f"{how:10s} {s['median']:8.1f} us CPU a bind ({s['min']:.1f}-{s['max']:.1f})")
    print(f"keepalive / aiohttp: {summary['keepalive / aiohttp']}")
    if args.json is not None:
        doc = {"binds": binds, "rounds": rounds, "runs": runs, "summary": summary}
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
