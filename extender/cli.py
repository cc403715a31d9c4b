"""The `decice-extender` console script: serve, rebalance, check-config, scores, doctor,
explain, scheduler-config."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from extender import __version__
from extender.config import ConfigError, Settings, exposure_problem, load_settings

if TYPE_CHECKING:
    from extender.logs import LogFormat

log = logging.getLogger("decice")


def _load(path: str) -> Settings:
    return load_settings(Path(path), os.environ)


def cmd_serve(args: argparse.Namespace) -> int:
    from extender import logs
    from extender.reload import read_policy
    from extender.service import PolicyFile, build_service, open_kube

    log_format = logs.log_format(args.log_format, os.environ)
    logs.configure_logging(args.log_level, log_format)
    # One read: the hash /readyz shows is of the very bytes the settings came from.
    settings, sha256 = read_policy(Path(args.config), os.environ)
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
        settings, kube=kube.client, kube_problem=kube.problem, policy_file=policy_file
    )
    port = args.port if args.port is not None else server.port
    apps = [(service.app, host, port, options)]
    if server.metrics_port is not None:
        # The metrics listener: /metrics, /healthz, /readyz only (apps.Apps.metrics). Its
        # server captures SIGTERM last, stops first (probes fail while we drain), then
        # hands the signal on to the verbs server, which drains in-flight requests.
        apps.append((service.metrics_app, server.metrics_host, server.metrics_port, {}))
    _run_servers(settings, args, log_format, apps)
    return 0


def cmd_rebalance(args: argparse.Namespace) -> int:
    """The rebalancer: the extender's refresher, engine and watches, no verbs, evicting
    (or in dry-run reporting) while it holds the Lease."""
    from extender import logs
    from extender.kube import load_api_client
    from extender.leader import LeaderElector
    from extender.reload import read_policy
    from extender.service import PolicyFile, build_service, open_kube

    log_format = logs.log_format(args.log_format, os.environ)
    logs.configure_logging(args.log_level, log_format)
    settings, sha256 = read_policy(Path(args.config), os.environ)
    rules = settings.rebalance
    kube = open_kube(settings, required=True)
    if kube.client is None:
        print(f"decice-extender rebalance: no Kubernetes client: {kube.problem}", file=sys.stderr)
        return 2
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    namespace = rules.lease_namespace or _own_namespace(os.environ)
    leader = LeaderElector(
        load_api_client(settings.kubernetes.kubeconfig),
        name=rules.lease_name,
        namespace=namespace,
        identity=identity,
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
        identity,
    )
    service = build_service(
        settings,
        kube=kube.client,
        policy_file=PolicyFile(Path(args.config), dict(os.environ), sha256),
        leader=leader,
    )
    port = args.port if args.port is not None else settings.server.metrics_port or 8889
    _run_servers(settings, args, log_format, [(service.app, args.host, port, {})])
    return 0


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace(environ: Mapping[str, str]) -> str:
    """POD_NAMESPACE (the downward API), else the service account's, else "default"."""
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def _run_servers(
    settings: Settings,
    args: argparse.Namespace,
    log_format: LogFormat,
    apps: list[tuple[Any, str, int, dict[str, Any]]],
) -> None:
    """Serve each (app, host, port, options) with uvicorn on one loop until SIGTERM."""
    import uvicorn
    import uvloop

    from extender import logs

    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that one a no-op so a clean shutdown exits 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
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


def _seconds(text: str) -> float:
    """A Go duration flag (validated as scheduler-config does) in seconds."""
    from extender.schedconfig import duration_ns, go_duration

    return (duration_ns(go_duration(text)) or 0) / 1e9


def cmd_check_config(args: argparse.Namespace) -> int:
    from extender.checks import policy_problems

    path = args.config_flag or args.config
    if path is None:
        print("decice-extender check-config: give the policy file: --config FILE", file=sys.stderr)
        return 2
    settings = _load(path)
    problems = policy_problems(settings, args.http_timeout)
    if problems:
        raise ConfigError(problems, path)
    if settings.policies is None:
        what = "metrics " + ", ".join(m.name for m in settings.default.metrics)
    else:
        what = "policies " + "; ".join(
            f"{name}{' (default)' if name == settings.default.name else ''}: "
            + ", ".join(m.name for m in policy.metrics)
            for name, policy in settings.policy_map.items()
        )
    print(f"{path}: ok ({settings.provider} provider; {what})")
    return 0


def cmd_scores(args: argparse.Namespace) -> int:
    """One refresh, then a table: node, each metric raw and normalised, score, verdict."""
    from extender.explain import explain_nodes
    from extender.logs import quieted
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


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check a policy against Prometheus and the cluster: a table, exit 1 on any FAIL."""
    from extender.causes import describe
    from extender.doctor import Query, examine, exit_code, render
    from extender.kube import KubeClient, load_api_client
    from extender.metrics import PrometheusProvider

    settings = _load(args.config)
    query: Query | None = None
    if settings.provider == "prometheus":
        try:
            query = PrometheusProvider(settings.prometheus).query
        except Exception as exc:  # a basicAuth password file it cannot read
            problem = exc

            def query(promql: str) -> list[Any]:
                raise problem

    kube: KubeClient | None = None
    kube_problem = None
    try:
        api = load_api_client(settings.kubernetes.kubeconfig)
        kube = KubeClient(api.configuration, timeout=args.timeout, retries=1)
    except Exception as exc:
        kube_problem = describe(exc)

    async def run() -> list[Any]:
        try:
            return await examine(settings, query, kube, kube_problem)
        finally:
            if kube is not None:
                await kube.close()

    rows = asyncio.run(run())
    print(render(rows))
    return exit_code(rows)


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
    """The KubeSchedulerConfiguration `extenders:` entry that fits this policy.

    `host` is where the scheduler dials us (checked by schedconfig.dial_host); None: the
    policy's server.host, loopback for a wildcard. IPv6 literals are bracketed.
    """
    from extender.schedconfig import scheduler_dials, url_host

    server = settings.server
    scheme = "https" if server.tls.enabled else "http"
    address = url_host(host) if host else scheduler_dials(server.host)
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


def _scheduler_config_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of scheduler-config flags, if anything."""

    def given(*names: str) -> list[str]:
        return ["--" + n.replace("_", "-") for n in names if getattr(args, n) is not None]

    if args.rbac:
        extra = given("config", "weight", "http_timeout", "host")
        if extra:
            return f"{', '.join(extra)}: not with --rbac, which prints only the lease's RBAC"
        return None
    if args.config is None:
        return "the following arguments are required: --config (unless --rbac)"
    if not args.full and (extra := given("lease_name", "lease_namespace")):
        return f"{', '.join(extra)}: only with --full or --rbac (the extenders entry has no lease)"
    if extra := given("service_account", "user"):
        return f"{', '.join(extra)}: only with --rbac (the RoleBinding's subject)"
    return None


def cmd_scheduler_config(args: argparse.Namespace) -> int:
    from extender import schedconfig as sc

    if problem := _scheduler_config_flags(args):
        args.subparser.error(problem)
    lease = args.lease_name or sc.DEFAULT_LEASE_NAME
    namespace = args.lease_namespace or sc.DEFAULT_LEASE_NAMESPACE
    if args.rbac:
        subject = (
            args.service_account
            or args.user
            or sc.Subject("ServiceAccount", sc.DEFAULT_SERVICE_ACCOUNT)
        )
        docs = sc.rbac_documents(lease, namespace, subject)
        sys.stdout.write(sc.rbac_header(lease, namespace))
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
        return 0
    settings = _load(args.config)
    weight = sc.DEFAULT_WEIGHT if args.weight is None else args.weight
    timeout = args.http_timeout or sc.DEFAULT_HTTP_TIMEOUT
    entry = scheduler_extender(settings, weight, timeout, args.host)
    doc: dict[str, Any] = {"extenders": [entry]}
    if args.full:
        profiles = [{"schedulerName": n} for n in sorted(settings.scheduler_names)]
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": sc.leader_election(lease, namespace),
            "percentageOfNodesToScore": 100,
            "profiles": profiles,
            "extenders": [entry],
        }
        sys.stdout.write(sc.full_header(lease, namespace))
    sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    return 0


def _log_options(command: argparse.ArgumentParser) -> None:
    """--log-level and --log-format, for the long-running commands."""
    command.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    command.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text (default) or json lines; also $DECICE_LOG_FORMAT",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="decice-extender", description=__doc__)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the extender HTTP service")
    s.add_argument("--config", required=True, help="policy YAML file")
    s.add_argument("--host", help="listen address (overrides server.host)")
    s.add_argument("--port", type=int, help="listen port (overrides server.port)")
    _log_options(s)
    s.set_defaults(func=cmd_serve)
    rb = sub.add_parser(
        "rebalance",
        help="re-check running pods and move them through the Eviction API (rebalance:)",
    )
    rb.add_argument("--config", required=True, help="policy YAML file")
    rb.add_argument("--host", default="0.0.0.0", help="/metrics, /healthz, /readyz address")
    rb.add_argument("--port", type=int, help="their port (default server.metricsPort, or 8889)")
    _log_options(rb)
    rb.set_defaults(func=cmd_rebalance)
    c = sub.add_parser("check-config", help="validate a policy file and exit")
    c.add_argument("config", nargs="?", help="policy YAML file (or --config)")
    c.add_argument("--config", dest="config_flag", metavar="FILE", help="policy YAML file")
    c.add_argument(
        "--http-timeout",
        type=_seconds,
        default=5.0,
        metavar="DURATION",
        help="the scheduler's extender httpTimeout the bind budget must fit in (default 5s)",
    )
    c.set_defaults(func=cmd_check_config)
    sc = sub.add_parser("scores", help="fetch metrics once and print each node's scores")
    sc.add_argument("--config", required=True)
    sc.add_argument("--policy", help="a named policy of the file (default: defaultPolicy)")
    sc.set_defaults(func=cmd_scores)
    d = sub.add_parser(
        "doctor", help="check a policy against Prometheus and the cluster (exit 1 on FAIL)"
    )
    d.add_argument("--config", required=True, help="policy YAML file")
    d.add_argument("--timeout", type=float, default=10.0, help="per Kubernetes API call")
    d.set_defaults(func=cmd_doctor)
    e = sub.add_parser("explain", help="why a pod went where it went (or is still pending)")
    e.add_argument("pod", help="NAMESPACE/NAME (or a UID with --uid)")
    e.add_argument("--uid", action="store_true", help="POD is a pod UID")
    e.add_argument("--url", default="http://127.0.0.1:8888", help="the extender's address")
    e.add_argument("--json", action="store_true", help="print the raw /explain document")
    e.add_argument("--timeout", type=float, default=10.0)
    e.set_defaults(func=cmd_explain)
    from extender import schedconfig as scf

    g = sub.add_parser(
        "scheduler-config",
        help="print the scheduler extender entry for a policy",
        description="Print the kube-scheduler extenders entry that fits a policy, a whole "
        "KubeSchedulerConfiguration (--full), or the RBAC its leader election needs "
        "(--rbac). docs/scheduler.md",
    )
    g.add_argument("--config", help="policy YAML file (required, except with --rbac)")
    g.add_argument("--weight", type=scf.extender_weight, help="extender weight, 1..100 (default 1)")
    g.add_argument(
        "--http-timeout",
        type=scf.go_duration,
        help="Go duration with units: 5s, 500ms, 1m30s (default 5s)",
    )
    g.add_argument(
        "--host",
        type=scf.dial_host,
        help="address the scheduler dials: 127.0.0.1, a DNS name or an IP; never 0.0.0.0 "
        "(default: the policy's server.host, loopback for a wildcard)",
    )
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="a whole KubeSchedulerConfiguration")
    mode.add_argument(
        "--rbac", action="store_true", help="the Role + RoleBinding for the leader-election lease"
    )
    g.add_argument(
        "--lease-name",
        type=scf.lease_name,
        help=f"leader-election Lease name (default {scf.DEFAULT_LEASE_NAME})",
    )
    g.add_argument(
        "--lease-namespace",
        type=scf.namespace_name,
        help="namespace of the Lease, the one kube-scheduler runs in "
        f"(default {scf.DEFAULT_LEASE_NAMESPACE})",
    )
    who = g.add_mutually_exclusive_group()
    who.add_argument(
        "--service-account",
        type=scf.service_account,
        metavar="[NAMESPACE/]NAME",
        help="--rbac: the ServiceAccount kube-scheduler runs as "
        f"(default {scf.DEFAULT_SERVICE_ACCOUNT} in the lease namespace)",
    )
    who.add_argument(
        "--user",
        type=scf.user_name,
        help="--rbac: the user kube-scheduler authenticates as, e.g. system:kube-scheduler",
    )
    g.set_defaults(func=cmd_scheduler_config, subparser=g)
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
