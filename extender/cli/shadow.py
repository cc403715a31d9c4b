"""`decice-extender shadow`: judge the placements the cluster's schedulers make against
our scores, changing nothing (read-only: it lists and watches pods and nodes)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from extender.cli.common import log_options, started
from extender.cli.servers import run_servers

log = logging.getLogger("decice")


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "shadow",
        help="judge other schedulers' placements against our scores; change nothing",
    )
    s.add_argument("--config", required=True, help="policy YAML file")
    s.add_argument(
        "--host", default="0.0.0.0", help="/metrics, /healthz, /readyz, /explain, /shadow"
    )
    s.add_argument("--port", type=int, help="their port (default server.metricsPort, or 8889)")
    log_options(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extender.cluster.connect import open_kube
    from extender.service.compose import PolicyFile, build_shadow

    settings, sha256, log_format = started(args)
    kube = open_kube(settings, required=True)
    if kube.client is None:
        print(f"decice-extender shadow: no Kubernetes client: {kube.problem}")
        return 2
    chosen = settings.shadow
    log.info(
        "decice-extender shadow starting: policy %s (sha256 %s); judging the pods of %s in %s, "
        "keeping the last %d",
        args.config,
        sha256[:12],
        ", ".join(chosen.scheduler_names) or "every scheduler",
        ", ".join(chosen.namespaces) or "every namespace",
        chosen.keep,
    )
    service = build_shadow(
        settings,
        kube=kube.client,
        policy_file=PolicyFile(Path(args.config), dict(os.environ), sha256),
    )
    port = args.port if args.port is not None else settings.server.metrics_port or 8889
    run_servers(settings, args, log_format, [(service.app, args.host, port, {})])
    return 0
