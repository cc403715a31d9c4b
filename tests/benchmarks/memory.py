"""The service's resident memory on a big cluster: N nodes, P pods watched.

    python -m tests.benchmarks.memory [--quick] [--nodes 15000] [--pods 150000]
        [--requests 200] [--json FILE]

A tests.harness.kubeapi.FakeKubeAPI in this process (so its memory is not the service's)
holds N nodes (4 cores each) and P running pods placed long ago by another scheduler
(one container, 100m, owned by ReplicaSets of 25), spread over the nodes. The real
service (`python -m extender serve`: the static three-metric policy of bench.py over the
N nodes, herd guard on, Events off) starts with the pod watch on, then off. Read from
/proc for each (MB): `listed`, once its watches have listed (the pod watch read every
pod); `warm`, after R prioritize calls with every node's name (the request path's own
growth); `hwm`, the peak (VmHWM). The chart's requests follow these
(deploy/helm/decice-extender/values.yaml). Bounded: each wait has a ceiling.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.benchmarks.bench import HOST, ROOT, node_names, request_body
from tests.benchmarks.bench import policy as bench_policy
from tests.benchmarks.burst import fake_api, service
from tests.harness.kubeapi import FakeKubeAPI
from tests.harness.loopback import free_port

JSON = dict[str, Any]
LIST_TIMEOUT = 900.0
"""Seconds the service may take to list P pods from the fake (one page of 500 at a time)."""


@dataclass(frozen=True)
class Sizes:
    nodes: int
    pods: int
    requests: int


FULL = Sizes(nodes=15000, pods=150000, requests=200)
QUICK = Sizes(nodes=100, pods=1000, requests=20)


def status_kib(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def add_running_pods(api: FakeKubeAPI, names: Sequence[str], count: int) -> None:
    for i in range(count):
        api.add_pod(
            "apps",
            f"web-{i // 25:05d}-{i % 25:02d}",
            str(uuid.uuid5(uuid.NAMESPACE_DNS, f"memory-{i}")),
            scheduler_name="default-scheduler",
            cpu_request="100m",
            node_name=names[i % len(names)],
            phase="Running",
            owner=("ReplicaSet", f"web-{i // 25:05d}"),
            created=1.0e9,
        )


def readyz(port: int) -> JSON:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    conn.request("GET", "/readyz")
    doc: JSON = orjson.loads(conn.getresponse().read())
    conn.close()
    return doc


def listed(port: int, watch_pods: bool) -> bool:
    watches = readyz(port).get("watches")
    if not watches:
        raise RuntimeError("the service has no watch: no Kubernetes client")
    wanted = ("nodes", "pods") if watch_pods else ("nodes",)
    return all((watches.get(w) or {}).get("resourceVersion") for w in wanted)


def measure(api: FakeKubeAPI, names: Sequence[str], sizes: Sizes, watch_pods: bool) -> JSON:
    port = free_port()
    config = bench_policy(names, port)
    config["kubernetes"] = {"watchPods": watch_pods}
    config["explain"] = {"events": False}
    config["bind"] = {"enabled": True}  # a Kubernetes client whatever the herd guard reads
    with (
        tempfile.TemporaryDirectory(prefix="memory-") as work,
        service(ROOT, Path(work), config, api) as pid,
    ):
        began = time.monotonic()
        while not listed(port, watch_pods):
            if time.monotonic() - began > LIST_TIMEOUT:
                raise RuntimeError(f"the service did not list in {LIST_TIMEOUT:.0f} s")
            time.sleep(0.5)
        list_s = time.monotonic() - began
        after_list = status_kib(pid)
        body = request_body(names, "names")
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        for _ in range(sizes.requests):
            conn.request("POST", "/prioritize", body, {"Content-Type": "application/json"})
            answer = conn.getresponse().read()
            if not answer.startswith(b"["):
                raise RuntimeError(f"prioritize answered {answer[:200]!r}")
        conn.close()
        warm = status_kib(pid)
        pods = (readyz(port).get("watches") or {}).get("pods") or {}
    return {
        "watch_pods": watch_pods,
        "list_s": round(list_s, 1),
        "listed_mb": round(after_list["VmRSS"] / 1024, 1),
        "warm_mb": round(warm["VmRSS"] / 1024, 1),
        "hwm_mb": round(warm["VmHWM"] / 1024, 1),
        "watch": pods,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.benchmarks.memory", description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--nodes", type=int)
    p.add_argument("--pods", type=int)
    p.add_argument("--requests", type=int)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    base = QUICK if args.quick else FULL
    sizes = Sizes(args.nodes or base.nodes, args.pods or base.pods, args.requests or base.requests)
    names = node_names(sizes.nodes)
    began = time.monotonic()
    api = fake_api(names)
    with api:
        add_running_pods(api, names, sizes.pods)
        print(
            f"fake API: {sizes.nodes} nodes, {sizes.pods} pods in {time.monotonic() - began:.0f} s"
        )
        rows = [measure(api, names, sizes, on) for on in (True, False)]
    for row in rows:
        print(
            f"watchPods {'on ' if row['watch_pods'] else 'off'}: listed in {row['list_s']} s, "
            f"RSS {row['listed_mb']} MB listed, {row['warm_mb']} MB after {sizes.requests} "
            f"prioritize calls, peak {row['hwm_mb']} MB"
        )
    if args.json is not None:
        data = {"sizes": vars(sizes), "rows": rows, "seconds": round(time.monotonic() - began)}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
