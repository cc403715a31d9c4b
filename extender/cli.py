"""The `decice-extender` console script: serve, check-config, scores, explain, scheduler-config."""

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
    from extender.explain import explain_nodes
    from extender.report import node_table
    from extender.service import build_service, connect_kube

    settings = _load(args.config)
    kube = connect_kube(settings) if settings.prometheus.node_label == "instance" else None
    service = build_service(settings, kube=kube)

    async def refresh() -> dict[str, str]:
        await service.prepare()  # the node list, for `instance` labels
        try:
            return await service.refresher.refresh_once()
        finally:
            if kube is not None:
                await kube.close()

    errors = asyncio.run(refresh())
    for name, error in errors.items():
        print(f"warning: metric {name}: {error}", file=sys.stderr)
    engine = service.engine
    now = time.time()
    table = engine.table(now)
    rows = explain_nodes(
        settings, engine.snapshot, table.stale, table.herd, sorted(table.evals), now
    )
    print(node_table(rows))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """GET /explain from a running extender and print it for a person (or as JSON)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from extender.report import explain_text

    key = "uid" if args.uid else "pod"
    query = urllib.parse.urlencode({key: args.pod})
    url = f"{args.url.rstrip('/')}/explain?{query}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("Error", "")
        except ValueError:
            message = ""
        print(f"decice-extender explain: {exc.code}: {message or exc.reason}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"decice-extender explain: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(explain_text(doc))
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
    e = sub.add_parser("explain", help="why a pod went where it went (or is still pending)")
    e.add_argument("pod", help="NAMESPACE/NAME (or a UID with --uid)")
    e.add_argument("--uid", action="store_true", help="POD is a pod UID")
    e.add_argument("--url", default="http://127.0.0.1:8888", help="the extender's address")
    e.add_argument("--json", action="store_true", help="print the raw /explain document")
    e.add_argument("--timeout", type=float, default=10.0)
    e.set_defaults(func=cmd_explain)
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
