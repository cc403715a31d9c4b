"""`decice-extender serve`: the extender HTTP service."""

from __future__ import annotations

import argparse
import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.cli.common import identity, log_options, own_namespace, started
from extender.cli.servers import Listener, run_servers
from extender.policy.fields import ConfigError
from extender.policy.sections import exposure_problem
from extender.policy.settings import Settings

if TYPE_CHECKING:
    from extender.cluster.kubeside import KubeSide
    from extender.cluster.leader.elector import LeaderElector


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("serve", help="run the extender HTTP service")
    s.add_argument("--config", required=True, help="policy YAML file")
    s.add_argument("--host", help="listen address (overrides server.host)")
    s.add_argument("--port", type=int, help="listen port (overrides server.port)")
    log_options(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extender.cluster.connect import open_kube
    from extender.service import logs
    from extender.service.compose import PolicyFile, build_service

    settings, sha256, log_format = started(args)
    server = settings.server
    tls = server.tls
    options: dict[str, Any] = {}
    if tls.enabled:
        options.update(ssl_certfile=tls.cert_file, ssl_keyfile=tls.key_file)
        if tls.client_ca_file:
            options.update(ssl_ca_certs=tls.client_ca_file, ssl_cert_reqs=ssl.CERT_REQUIRED)
    host = args.host or server.host
    problem = exposure_problem(server.model_copy(update={"host": host}), settings.bind.enabled)
    if problem is not None:
        raise ConfigError([f"--host: {problem}"], args.config)
    logs.log_startup(settings, args.config, Path(args.config).read_bytes(), host, args.port)
    kube = open_kube(settings)
    policy_file = PolicyFile(Path(args.config), dict(os.environ), sha256)
    service = build_service(
        settings,
        kube=kube.client,
        kube_problem=kube.problem,
        policy_file=policy_file,
        overload_leader=_overload_leader(settings) if kube.client is not None else None,
        kube_side=_kube_side(settings) if kube.client is not None else None,
    )
    port = args.port if args.port is not None else server.port
    apps: list[Listener] = [(service.app, host, port, options)]
    if server.metrics_port is not None:
        # The metrics listener: /metrics, /healthz, /readyz only (apps.Apps.metrics). Its
        # server captures SIGTERM last, stops first (probes fail while we drain), then
        # hands the signal on to the verbs server, which drains in-flight requests.
        apps.append((service.metrics_app, server.metrics_host, server.metrics_port, {}))
    run_servers(settings, args, log_format, apps)
    return 0


KUBE_PROCESS = "DECICE_KUBE_PROCESS"
"""Set to 1: binds and Events go through a Kubernetes-side process of their own
(extender.cluster.kubeside), off the interpreter that answers filter and prioritize."""


def _kube_side(settings: Settings) -> KubeSide | None:
    if os.environ.get(KUBE_PROCESS, "").strip() != "1":
        return None
    from extender.cluster.kubeside import KubeSide, worker_argv

    bind = settings.bind
    return KubeSide(worker_argv(settings.kubernetes.kubeconfig, bind.timeout, bind.retries))


def _overload_leader(settings: Settings) -> LeaderElector | None:
    """With overload.enabled: the elector on the overload Lease (one replica writes)."""
    rules = settings.overload
    if not rules.enabled:
        return None
    from extender.cluster.client import load_api_client
    from extender.cluster.leader.elector import LeaderElector

    return LeaderElector(
        load_api_client(settings.kubernetes.kubeconfig),
        name=rules.lease_name,
        namespace=rules.lease_namespace or own_namespace(os.environ),
        identity=identity(os.environ),
    )
