"""`decice-extender scores`: fetch metrics once and print each node's scores."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from extender.cli.common import load


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sc = sub.add_parser("scores", help="fetch metrics once and print each node's scores")
    sc.add_argument("--config", required=True)
    sc.add_argument("--policy", help="a named policy of the file (default: defaultPolicy)")
    sc.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """One refresh, then a table: node, each metric raw and normalised, score, verdict."""
    from extender.cli.report import node_table
    from extender.cluster.connect import connect_kube
    from extender.decisions.explain import explain_nodes
    from extender.service.compose import build_service
    from extender.service.logs import quieted

    settings = load(args.config)
    kube = connect_kube(settings) if settings.prometheus.node_label == "instance" else None
    service = build_service(settings, kube=kube)

    async def refresh() -> dict[str, str]:
        await service.prepare()  # the node list, for `instance` labels
        try:
            return await service.refresher.refresh_once()
        finally:
            if kube is not None:
                await kube.close()

    # The refresh errors are printed below, once each: not also as the refresher's warning.
    with quieted("decice.refresher"):
        errors = asyncio.run(refresh())
    for name, error in errors.items():
        print(f"warning: metric {name}: {error}", file=sys.stderr)
    engine = service.engine
    now = time.time()
    policy = settings.policy_map.get(args.policy) if args.policy else settings.default
    if policy is None:
        print(
            f"decice-extender scores: no policy {args.policy!r} "
            f"(policies: {', '.join(settings.policy_map)})",
            file=sys.stderr,
        )
        return 2
    table = engine.table(now, policy)
    rows = explain_nodes(policy, engine.snapshot, table.stale, table.herd, sorted(table.evals), now)
    print(node_table(rows))
    return 0
