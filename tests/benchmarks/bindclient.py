"""CPU per Binding through our Kubernetes client, on the real API server; and, with
`--before-tree`, through an older tree's client in the same sitting.

    python -m tests.benchmarks.bindclient [--quick] [--binds 600] [--rounds 3]
        [--before-tree DIR] [--json FILE]

A real control plane (tests/harness/controlplane.py: etcd, kube-apiserver with TLS and
bearer tokens), 50 fake nodes, then per round and per variant, interleaved (ours 1,
before 1, ours 2, ...): B pods created, then bound 4 at a time (the scheduler pipelines
its binds) by `KubeClient.bind` in a fresh process on a uvloop loop, 20 binds to warm it
first. Reported: that process's CPU (time.process_time: utime + stime) per bind over the
measured binds, and their wall time.

- `ours`: this tree's `extender` package;
- `before` (with `--before-tree DIR`): the `extender` package of DIR (`git archive OLD
  extender | tar -x -C DIR`), run with PYTHONPATH there, e.g. the tree before the client
  moved onto aiohttp alone.

Printed: medians (min-max) per variant and, with both, the ratio ours / before. `--quick`
(20 binds, 1 round, ours only) is what test_bindclient_quick.py runs. Bounded: B binds a
round, each with the client's own timeout; each round's process has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.harness.controlplane import ControlPlane, fake_nodes, pod_manifest

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("ours", "before")
NODES = 50
IN_FLIGHT = 4
WARM = 20
NAMESPACE = "binds"
ROUND_TIMEOUT = 300.0
"""Seconds one round's process may take."""
RUN_KEYS = ("variant", "round", "binds", "cpu_us_per_bind", "wall_s")


# -- in the round's process ---------------------------------------------------------------


async def bind_all(client: Any, pods: Sequence[Sequence[str]]) -> None:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int, name: str, uid: str) -> None:
        async with slots:
            outcome = await client.bind(NAMESPACE, name, uid, f"node-{i % NODES + 1}")
            assert outcome == "bound", outcome

    await asyncio.gather(*(one(i, name, uid) for i, (name, uid) in enumerate(pods)))


def one_round(kubeconfig: str, pods: Sequence[Sequence[str]]) -> dict[str, float]:
    """Bind `pods` (the first WARM unmeasured) through whichever `extender` is on the path."""
    import uvloop

    import extender
    from extender.cluster.client import KubeClient, load_api_client

    print(f"extender from {Path(extender.__file__).parent}", file=sys.stderr)
    configuration = load_api_client(kubeconfig).configuration

    async def go() -> tuple[float, float]:
        client = KubeClient(configuration)
        try:
            await bind_all(client, pods[:WARM])
            cpu, wall = time.process_time(), time.perf_counter()
            await bind_all(client, pods[WARM:])
            return time.process_time() - cpu, time.perf_counter() - wall
        finally:
            await client.close()

    cpu, wall = uvloop.run(go())
    return {"cpu_s": cpu, "wall_s": wall}


# -- the sitting ----------------------------------------------------------------------------


def run_round(
    cp: ControlPlane, variant: str, index: int, binds: int, before_tree: Path | None, work: Path
) -> dict[str, Any]:
    made = cp.kube.create_pods(
        NAMESPACE, [pod_manifest(f"{variant}-{index}-{i}") for i in range(WARM + binds)]
    )
    pods = [(p["metadata"]["name"], p["metadata"]["uid"]) for p in made]
    spec = work / f"round-{variant}-{index}.json"
    spec.write_text(json.dumps({"kubeconfig": str(cp.kubeconfig()), "pods": pods}))
    env, cwd = dict(os.environ), ROOT
    if variant == "before":
        # `-m` puts the working directory first on the path: the old tree's, then ours
        # for `tests`.
        assert before_tree is not None
        env["PYTHONPATH"] = os.pathsep.join([str(before_tree), str(ROOT)])
        cwd = before_tree
    done = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bindclient", "--round", str(spec)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=ROUND_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{variant} round {index} failed: {done.stderr[-3000:]}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "variant": variant,
        "round": index,
        "binds": binds,
        "cpu_us_per_bind": round(measured["cpu_s"] / binds * 1e6, 1),
        "wall_s": round(measured["wall_s"], 3),
    }


def summarize(runs: Sequence[dict[str, Any]], variants: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in variants:
        values = [r["cpu_us_per_bind"] for r in runs if r["variant"] == variant]
        out[variant] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
        }
    if "before" in out:
        out["ours / before"] = round(out["ours"]["median"] / out["before"]["median"], 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bindclient", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="20 binds, 1 round")
    p.add_argument("--binds", type=int, help="binds measured per round (default 600)")
    p.add_argument("--rounds", type=int, help="rounds per variant (default 3)")
    p.add_argument("--before-tree", type=Path, help="a tree with an older `extender` package")
    p.add_argument("--json", type=Path)
    p.add_argument("--round", type=Path, help=argparse.SUPPRESS)  # one round's process
    args = p.parse_args(argv)
    if args.round is not None:
        spec = json.loads(args.round.read_text())
        print(json.dumps(one_round(spec["kubeconfig"], spec["pods"])))
        return 0
    binds = args.binds or (20 if args.quick else 600)
    rounds = args.rounds or (1 if args.quick else 3)
    if binds < 1 or rounds < 1:
        p.error("--binds and --rounds must be at least 1")
    if args.before_tree is not None and not (args.before_tree / "extender").is_dir():
        p.error(f"--before-tree {args.before_tree}: no extender package there")
    variants = VARIANTS if args.before_tree is not None else VARIANTS[:1]
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bindclient-") as work,
        ControlPlane(Path(work)) as cp,
    ):
        cp.kube.ensure_nodes(fake_nodes(NODES))
        cp.kube.create_namespace(NAMESPACE)
        for index in range(1, rounds + 1):
            for variant in variants:
                row = run_round(cp, variant, index, binds, args.before_tree, Path(work))
                runs.append(row)
                print(
                    f"{variant} round {index}: {row['cpu_us_per_bind']} us CPU a bind, "
                    f"{row['wall_s']} s",
                    file=sys.stderr,
                    flush=True,
                )
    summary = summarize(runs, variants)
    for variant in variants:
        s = summary[variant]
        print(f"{variant:8s} {s['median']:8.1f} us CPU a bind ({s['min']:.1f}-{s['max']:.1f})")
    if "ours / before" in summary:
        print(f"ours / before: {summary['ours / before']}")
    if args.json is not None:
        doc = {"binds": binds, "rounds": rounds, "runs": runs, "summary": summary}
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
