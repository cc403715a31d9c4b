"""`decice-extender scheduler-config`: the kube-scheduler extenders entry that fits a policy,
a whole KubeSchedulerConfiguration (--full), or the RBAC its leader election needs (--rbac).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import yaml

from extender.policy import scheduler_config as sc
from extender.policy.loading import load_settings
from extender.policy.settings import Settings


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    g = sub.add_parser(
        "scheduler-config",
        help="print the scheduler extender entry for a policy",
        description="Print the kube-scheduler extenders entry that fits a policy, a whole "
        "KubeSchedulerConfiguration (--full), or the RBAC its leader election needs "
        "(--rbac). docs/scheduler.md",
    )
    g.add_argument("--config", help="policy YAML file (required, except with --rbac)")
    g.add_argument(
        "--weight",
        type=sc.extender_weight,
        help=f"extender weight, 1..100 (default {sc.DEFAULT_WEIGHT})",
    )
    g.add_argument(
        "--http-timeout",
        type=sc.go_duration,
        help=f"Go duration with units: 5s, 500ms, 1m30s (default {sc.DEFAULT_HTTP_TIMEOUT})",
    )
    g.add_argument(
        "--host",
        type=sc.dial_host,
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
        type=sc.lease_name,
        help=f"leader-election Lease name (default {sc.DEFAULT_LEASE_NAME})",
    )
    g.add_argument(
        "--lease-namespace",
        type=sc.namespace_name,
        help="namespace of the Lease, the one kube-scheduler runs in "
        f"(default {sc.DEFAULT_LEASE_NAMESPACE})",
    )
    who = g.add_mutually_exclusive_group()
    who.add_argument(
        "--service-account",
        type=sc.service_account,
        metavar="[NAMESPACE/]NAME",
        help="--rbac: the ServiceAccount kube-scheduler runs as "
        f"(default {sc.DEFAULT_SERVICE_ACCOUNT} in the lease namespace)",
    )
    who.add_argument(
        "--user",
        type=sc.user_name,
        help="--rbac: the user kube-scheduler authenticates as, e.g. system:kube-scheduler",
    )
    g.set_defaults(func=run, subparser=g)


def scheduler_extender(
    settings: Settings, weight: int, timeout: str, host: str | None
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration `extenders:` entry that fits this policy; `host` (from
    dial_host) None: the policy's server.host, loopback for a wildcard."""
    server = settings.server
    scheme = "https" if server.tls.enabled else "http"
    address = sc.url_host(host) if host else sc.scheduler_dials(server.host)
    entry: dict[str, Any] = {"urlPrefix": f"{scheme}://{address}:{server.port}{server.url_prefix}"}
    # A policy that filters nothing and fails open cannot reject a node: skip the filter call.
    if settings.filters_anything:
        entry["filterVerb"] = "filter"
        entry["preemptVerb"] = "preempt"
    entry["prioritizeVerb"] = "prioritize"
    if settings.bind.enabled:
        entry["bindVerb"] = "bind"
    entry.update(weight=weight, enableHTTPS=server.tls.enabled, nodeCacheCapable=True)
    if server.tls.enabled:
        # Paths on the scheduler's side: fill in (config/scheduler-config-tls.yaml).
        tls: dict[str, Any] = {"serverName": "<a DNS name in the extender certificate>"}
        tls["caFile"] = "<CA bundle that signed server.tls.certFile>"
        if server.tls.client_ca_file:
            tls["certFile"] = "<scheduler client certificate, signed by server.tls.clientCAFile>"
            tls["keyFile"] = "<its key>"
        entry["tlsConfig"] = tls
    entry.update(ignorable=False, httpTimeout=timeout)
    return entry


def _flag_problem(args: argparse.Namespace) -> str | None:
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


def run(args: argparse.Namespace) -> int:
    if problem := _flag_problem(args):
        args.subparser.error(problem)
    lease = args.lease_name or sc.DEFAULT_LEASE_NAME
    namespace = args.lease_namespace or sc.DEFAULT_LEASE_NAMESPACE
    if args.rbac:
        subject = (
            args.service_account or args.user or sc.service_account(sc.DEFAULT_SERVICE_ACCOUNT)
        )
        docs = sc.rbac_documents(lease, namespace, subject)
        sys.stdout.write(sc.rbac_header(lease, namespace))
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
        return 0
    settings = load_settings(args.config, os.environ)
    weight = sc.DEFAULT_WEIGHT if args.weight is None else args.weight
    timeout = args.http_timeout or sc.DEFAULT_HTTP_TIMEOUT
    entry = scheduler_extender(settings, weight, timeout, args.host)
    doc: dict[str, Any] = {"extenders": [entry]}
    if args.full:
        profiles = [{"schedulerName": n} for n in sorted(settings.scheduler_names)]
        doc = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {
                "leaderElect": True,
                "resourceLock": "leases",
                "resourceName": lease,
                "resourceNamespace": namespace,
            },
            "percentageOfNodesToScore": 100,
            "profiles": profiles,
            "extenders": [entry],
        }
        sys.stdout.write(sc.full_header(lease, namespace))
    sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    return 0
