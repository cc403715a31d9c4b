"""`decice-extender rebalance`: the rebalancer, the extender's refresher, engine and
watches with no verbs, evicting (or in dry-run reporting) while it holds the Lease."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from extender.cli.common import identity, log_options, own_namespace, started
from extender.cli.servers import run_servers

log = logging.getLogger("decice")


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rb = sub.add_parser(
        "rebalance",
        help="re-check running pods and move them through the Eviction API (rebalance:)",
    )
    rb.add_argument("--config", required=True, help="policy YAML file")
    rb.add_argument("--host", default="0.0.0.0", help="/metrics, /healthz, /readyz address")
    rb.add_argument("--port", type=int, help="their port (default server.metricsPort, or 8889)")
    log_options(rb)
    rb.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extender.cluster.client import load_api_client
    from extender.cluster.connect import open_kube
    from extender.cluster.leader.elector import LeaderElector
    from extender.service.compose import PolicyFile, build_rebalancer

    settings, sha256, log_format = started(args)
    rules = settings.rebalance
    kube = open_kube(settings, required=True)
    if kube.client is None:
        print(f"decice-extender rebalance: no Kubernetes client: {kube.problem}", file=sys.stderr)
        return 2
    me = identity(os.environ)
    namespace = rules.lease_namespace or own_namespace(os.environ)
    leader = LeaderElector(
        load_api_client(settings.kubernetes.kubeconfig),
        name=rules.lease_name,
        namespace=namespace,
        identity=me,
        lease_duration=rules.lease_duration,
        renew_deadline=rules.renew_deadline,
        retry_period=rules.retry_period,
    )
    log.info(
        "decice-extender rebalancer starting: policy %s (sha256 %s), mode %s, every %gs, "
        "margin %d, sustain %d, lease %s/%s as %s",
        args.config,
        sha256[:12],
        rules.mode,
        rules.interval,
        rules.margin,
        rules.sustain,
        namespace,
        rules.lease_name,
        me,
    )
    service = build_rebalancer(
        settings,
        leader=leader,
        kube=kube.client,
        policy_file=PolicyFile(Path(args.config), dict(os.environ), sha256),
    )
    port = args.port if args.port is not None else settings.server.metrics_port or 8889
    run_servers(settings, args, log_format, [(service.app, args.host, port, {})])
    return 0
