"""`decice-extender serve`: the extender HTTP service."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.cli.common import identity, log_options, own_namespace, started
from extender.cli.servers import Listener, run_servers
from extender.policy.fields import ConfigError
from extender.policy.sections import exposure_problem
from extender.policy.settings import Settings

if TYPE_CHECKING:
    from extender.cluster.leader.elector import LeaderElector

log = logging.getLogger("decice.service")


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
    _removed_settings(os.environ)
    kube = open_kube(settings)
    policy_file = PolicyFile(Path(args.config), dict(os.environ), sha256)
    service = build_service(
        settings,
        kube=kube.client,
        kube_problem=kube.problem,
        policy_file=policy_file,
        overload_leader=_overload_leader(settings) if kube.client is not None else None,
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
"""Removed: binds and Events went through a process of their own when it was 1. They run
in the service's process; a setting left behind is named in a warning, once."""


def _removed_settings(environ: Mapping[str, str]) -> None:
    if KUBE_PROCESS in environ:
        log.warning(
            "%s is no longer read (binds and Events run in the service's process, and "
            "the child process that took them is gone); unset it",
            KUBE_PROCESS,
        )


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
