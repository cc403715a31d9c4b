"""The long-running commands, served with uvicorn on one event loop: `serve` (the extender),
`rebalance` (the rebalancer, evicting while it holds its Lease) and `shadow` (our verdict
on other schedulers' placements, changing nothing)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.policy.fields import ConfigError
from extender.policy.sections import exposure_problem
from extender.policy.settings import Settings

if TYPE_CHECKING:
    from extender.cluster.leader.elector import LeaderElector
    from extender.service.compose import Service
    from extender.service.logs import LogFormat

log = logging.getLogger("decice")

Listener = tuple[Any, str, int, dict[str, Any]]
"""(ASGI app, host, port, uvicorn options)."""

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

KUBE_PROCESS = "DECICE_KUBE_PROCESS"
"""Removed (binds and Events ran in a process of their own); a leftover gets a warning."""


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", required=True, help="policy YAML file")
    common.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    common.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text (default) or json lines; also $DECICE_LOG_FORMAT",
    )
    s = sub.add_parser("serve", parents=[common], help="run the extender HTTP service")
    s.add_argument("--host", help="listen address (overrides server.host)")
    s.add_argument("--port", type=int, help="listen port (overrides server.port)")
    s.set_defaults(func=serve)
    for name, run, help, where in (
        (
            "rebalance",
            rebalance,
            "re-check running pods and move them through the Eviction API (rebalance:)",
            "/metrics, /healthz, /readyz address",
        ),
        (
            "shadow",
            shadow,
            "judge other schedulers' placements against our scores; change nothing",
            "/metrics, /healthz, /readyz, /explain, /shadow",
        ),
    ):
        p = sub.add_parser(name, parents=[common], help=help)
        p.add_argument("--host", default="0.0.0.0", help=where)
        p.add_argument("--port", type=int, help="their port (default server.metricsPort, or 8889)")
        p.set_defaults(func=run)


def started(args: argparse.Namespace) -> tuple[Settings, str, LogFormat]:
    """Logging configured from the flags, then the policy read once (the hash /readyz
    shows is of the very bytes the settings came from): (settings, sha256, log format)."""
    from extender.policy.loading import read_policy
    from extender.service import logs

    log_format = logs.log_format(args.log_format, os.environ)
    logs.configure_logging(args.log_level, log_format)
    settings, sha256 = read_policy(Path(args.config), os.environ)
    return settings, sha256, log_format


def serve(args: argparse.Namespace) -> int:
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
    if KUBE_PROCESS in os.environ:
        log.warning(
            "%s is no longer read (binds and Events run in the service's process, and "
            "the child process that took them is gone); unset it",
            KUBE_PROCESS,
        )
    kube = open_kube(settings)
    overload = settings.overload
    service = build_service(
        settings,
        kube=kube.client,
        kube_problem=kube.problem,
        policy_file=PolicyFile(Path(args.config), dict(os.environ), sha256),
        overload_leader=_elector(settings, overload.lease_name, overload.lease_namespace)
        if overload.enabled and kube.client is not None
        else None,
    )
    port = args.port if args.port is not None else server.port
    apps: list[Listener] = [(service.app, host, port, options)]
    if server.metrics_port is not None:
        # /metrics, /healthz, /readyz only. Its server captures SIGTERM last, so stops first
        # (probes fail while we drain), then hands the signal on to the verbs' server.
        apps.append((service.metrics_app, server.metrics_host, server.metrics_port, {}))
    run_servers(settings, args, log_format, apps)
    return 0


def rebalance(args: argparse.Namespace) -> int:
    from extender.service.compose import build_rebalancer

    def starting(settings: Settings, sha256: str) -> dict[str, Any]:
        rules = settings.rebalance
        timings = rules.model_dump(include={"lease_duration", "renew_deadline", "retry_period"})
        leader = _elector(settings, rules.lease_name, rules.lease_namespace, **timings)
        log.info(
            "decice-extender rebalancer starting: policy %s (sha256 %s), mode %s, every %gs, "
            "margin %d, sustain %d, lease %s/%s as %s",
            args.config,
            sha256[:12],
            rules.mode,
            rules.interval,
            rules.margin,
            rules.sustain,
            leader.namespace,
            rules.lease_name,
            leader.identity,
        )
        return {"leader": leader}

    return _run_beside(args, build_rebalancer, starting)


def shadow(args: argparse.Namespace) -> int:
    from extender.service.compose import build_shadow

    def starting(settings: Settings, sha256: str) -> dict[str, Any]:
        chosen = settings.shadow
        log.info(
            "decice-extender shadow starting: policy %s (sha256 %s); judging the pods of %s "
            "in %s, keeping the last %d",
            args.config,
            sha256[:12],
            ", ".join(chosen.scheduler_names) or "every scheduler",
            ", ".join(chosen.namespaces) or "every namespace",
            chosen.keep,
        )
        return {}

    return _run_beside(args, build_shadow, starting)


def _run_beside(
    args: argparse.Namespace,
    build: Callable[..., Service],
    starting: Callable[[Settings, str], dict[str, Any]],
) -> int:
    """rebalance and shadow: a Kubernetes client whatever the policy, and one listener."""
    from extender.cluster.connect import open_kube
    from extender.service.compose import PolicyFile

    settings, sha256, log_format = started(args)
    kube = open_kube(settings, required=True)
    if kube.client is None:
        print(
            f"decice-extender {args.command}: no Kubernetes client: {kube.problem}", file=sys.stderr
        )
        return 2
    parts = starting(settings, sha256)
    policy_file = PolicyFile(Path(args.config), dict(os.environ), sha256)
    service = build(settings, kube=kube.client, policy_file=policy_file, **parts)
    port = args.port if args.port is not None else settings.server.metrics_port or 8889
    run_servers(settings, args, log_format, [(service.app, args.host, port, {})])
    return 0


def _elector(settings: Settings, name: str, namespace: str | None, **timings: Any) -> LeaderElector:
    """The elector on a Lease: in `namespace`, else POD_NAMESPACE, else the service
    account's, else "default"; as POD_NAME, else host-pid."""
    from extender.cluster.client import load_api_client
    from extender.cluster.leader.elector import LeaderElector

    own = ""
    with contextlib.suppress(OSError):
        own = os.environ.get("POD_NAMESPACE") or SERVICE_ACCOUNT_NAMESPACE.read_text("utf-8")
    return LeaderElector(
        load_api_client(settings.kubernetes.kubeconfig),
        name=name,
        namespace=namespace or own.strip() or "default",
        identity=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        **timings,
    )


def run_servers(
    settings: Settings, args: argparse.Namespace, log_format: LogFormat, apps: list[Listener]
) -> None:
    """Serve each (app, host, port, options) with uvicorn on one loop until SIGTERM."""
    import uvicorn
    import uvloop

    from extender.service import logs

    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that one a no-op so a clean shutdown exits 0.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    common: dict[str, Any] = {
        "loop": "uvloop",
        "http": "httptools",
        "access_log": False,
        "log_level": args.log_level.lower(),
        "log_config": logs.uvicorn_log_config(args.log_level, log_format),
        "timeout_graceful_shutdown": int(settings.server.grace_period + 0.999),
    }
    servers = []
    for i, (app, host, port, options) in enumerate(apps):
        # The first app runs the lifespan (refresher, watches); the others share its state.
        extra: dict[str, Any] = {} if i == 0 else {"lifespan": "off"}
        config = uvicorn.Config(app, host=host, port=port, **common, **extra, **options)
        servers.append(uvicorn.Server(config))

    async def serve_all() -> None:
        await asyncio.gather(*(s.serve() for s in servers))

    uvloop.run(serve_all())
    log.info("stopped")
