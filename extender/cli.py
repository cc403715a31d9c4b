"""The `decice-extender` console script: serve, check-config, scores, scheduler-config."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from extender.config import ConfigError, Settings, load_settings
from extender.scoring import normalise_range, stale_metrics

log = logging.getLogger("decice")


def _load(path: str) -> Settings:
    return load_settings(Path(path), os.environ)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from extender.service import build_service, connect_kube
    from extender.telemetry import configure_logging

    configure_logging(args.log_level)
    settings = _load(args.config)
    server = settings.server
    tls = server.tls
    options: dict[str, Any] = {}
    if tls.enabled:
        options.update(ssl_certfile=tls.cert_file, ssl_keyfile=tls.key_file)
        if tls.client_ca_file:
            options.update(ssl_ca_certs=tls.client_ca_file, ssl_cert_reqs=ssl.CERT_REQUIRED)
    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that one a no-op so a clean shutdown exits 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    uvicorn.run(
        build_service(settings, kube=connect_kube(settings)).app,
        host=args.host or server.host,
        port=args.port if args.port is not None else server.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level=args.log_level.lower(),
        timeout_graceful_shutdown=int(server.grace_period + 0.999),
        **options,
    )
    log.info("stopped")
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    settings = _load(args.config)
    names = ", ".join(m.name for m in settings.metrics)
    print(f"{args.config}: ok ({settings.provider} provider; metrics: {names})")
    return 0


def cmd_scores(args: argparse.Namespace) -> int:
    """One refresh, then a table: node, each metric raw and normalised, score, verdict."""
    from extender.service import build_service, connect_kube

    settings = _load(args.config)
    kube = connect_kube(settings) if settings.prometheus.node_label == "instance" else None
    service = build_service(settings, kube=kube)
    engine = service.engine
    errors = asyncio.run(service.refresher.refresh_once())
    for name, error in errors.items():
        print(f"warning: metric {name}: {error}", file=sys.stderr)
    table = engine.table(time.time())
    stale = stale_metrics(settings, engine.snapshot, time.time())
    header = ["NODE"]
    for m in settings.metrics:
        header += [m.name.upper(), "NORM"]
    header += ["SCORE", "FILTER"]
    rows = [header]
    for node in sorted(table.evals):
        e = table.evals[node]
        row = [node]
        for m, value in zip(settings.metrics, e.values, strict=True):
            if value is None:
                row += ["-", "stale" if m.name in stale else "missing"]
            elif m.normalize == "candidates":
                row += [f"{value:.4g}", "(cand)"]
            else:
                row += [f"{value:.4g}", f"{normalise_range(m, value):.2f}"]
        row += [str(table.scores[node]), "pass" if e.reason is None else f"FAIL {e.reason}"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    if len(rows) == 1:
        print("(no node has data)")
    return 0


def scheduler_extender(
    settings: Settings, weight: int, timeout: str, host: str | None
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration `extenders:` entry that fits this policy."""
    server = settings.server
    scheme = "https" if server.tls.enabled else "http"
    address = host or ("127.0.0.1" if server.host in ("0.0.0.0", "::", "") else server.host)
    entry: dict[str, Any] = {"urlPrefix": f"{scheme}://{address}:{server.port}{server.url_prefix}"}
    # A policy that filters nothing and fails open cannot reject a node: skip the filter call.
    if settings.filters_anything:
        entry["filterVerb"] = "filter"
        entry["preemptVerb"] = "preempt"
    entry["prioritizeVerb"] = "prioritize"
    if settings.bind.enabled:
        entry["bindVerb"] = "bind"
    entry.update(weight=weight, enableHTTPS=server.tls.enabled, nodeCacheCapable=True)
    if (
        server.tls.enabled
    ):  # paths on the scheduler's side: fill in (config/scheduler-config-tls.yaml)
        tls: dict[str, Any] = {"serverName": "<a DNS name in the extender certificate>"}
        tls["caFile"] = "<CA bundle that signed server.tls.certFile>"
        if server.tls.client_ca_file:
            tls["certFile"] = "<scheduler client certificate, signed by server.tls.clientCAFile>"
            tls["keyFile"] = "<its key>"
        entry["tlsConfig"] = tls
    entry.update(ignorable=False, httpTimeout=timeout)
    return entry


def cmd_scheduler_config(args: argparse.Namespace) -> int:
    settings = _load(args.config)
    entry = scheduler_extender(settings, args.weight, args.http_timeout, args.host)
    doc: dict[str, Any] = {"extenders": [entry]}
    if args.full:
        profiles = [{"schedulerName": n} for n in sorted(settings.scheduler_names)]
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": True, "resourceName": "decice-scheduler"},
            "percentageOfNodesToScore": 100,
            "profiles": profiles,
            "extenders": [entry],
        }
    sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="decice-extender", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the extender HTTP service")
    s.add_argument("--config", required=True, help="policy YAML file")
    s.add_argument("--host", help="listen address (overrides server.host)")
    s.add_argument("--port", type=int, help="listen port (overrides server.port)")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.set_defaults(func=cmd_serve)
    c = sub.add_parser("check-config", help="validate a policy file and exit")
    c.add_argument("config")
    c.set_defaults(func=cmd_check_config)
    sc = sub.add_parser("scores", help="fetch metrics once and print each node's scores")
    sc.add_argument("--config", required=True)
    sc.set_defaults(func=cmd_scores)
    g = sub.add_parser("scheduler-config", help="print the scheduler extender entry for a policy")
    g.add_argument("--config", required=True)
    g.add_argument("--weight", type=int, default=1)
    g.add_argument("--http-timeout", default="5s")
    g.add_argument("--host", help="address the scheduler uses to reach us")
    g.add_argument("--full", action="store_true", help="a whole KubeSchedulerConfiguration")
    g.set_defaults(func=cmd_scheduler_config)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"decice-extender: invalid configuration: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
