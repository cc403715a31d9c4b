"""The commands that check a policy file: `check-config` (offline), `scores` (one refresh,
each node's scores) and `doctor` (against the live Prometheus and cluster)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from extender.policy.fields import ConfigError
from extender.policy.loading import load_settings
from extender.policy.settings import Settings


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("check-config", help="validate a policy file and exit")
    # One dest: the file as a positional argument or with --config.
    c.add_argument("config", nargs="?", default=argparse.SUPPRESS, help="policy YAML file")
    c.add_argument("--config", dest="config", metavar="FILE", help="policy YAML file")
    c.add_argument(
        "--http-timeout",
        type=_seconds,
        default=5.0,
        metavar="DURATION",
        help="the scheduler's extender httpTimeout the bind budget must fit in (default 5s)",
    )
    c.set_defaults(func=check_config)
    s = sub.add_parser("scores", help="fetch metrics once and print each node's scores")
    s.add_argument("--config", required=True)
    s.add_argument("--policy", help="a named policy of the file (default: defaultPolicy)")
    s.set_defaults(func=scores)
    d = sub.add_parser(
        "doctor", help="check a policy against Prometheus and the cluster (exit 1 on FAIL)"
    )
    d.add_argument("--config", required=True, help="policy YAML file")
    d.add_argument("--timeout", type=float, default=10.0, help="per Kubernetes API call")
    d.set_defaults(func=doctor)


def _seconds(text: str) -> float:
    """A Go duration flag (validated as scheduler-config does) in seconds."""
    from extender.policy.scheduler_config import go_duration
    from extender.policy.windows import GO_UNITS, duration

    return duration(go_duration(text), GO_UNITS) or 0.0


def check_config(args: argparse.Namespace) -> int:
    from extender.policy.checks import policy_problems

    path = args.config
    if path is None:
        print("decice-extender check-config: give the policy file: --config FILE", file=sys.stderr)
        return 2
    settings = load_settings(path, os.environ)
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
    print(herd_guard_line(settings))
    return 0


def herd_guard_line(settings: Settings) -> str:
    """How the herd guard will count placed pods: at what, and for how long."""
    from extender.policy.windows import herd_window

    guard = settings.herd_guard
    if not settings.herd_guarded:
        return "herd guard: off (no policy has a herd metric, or herdGuard.enabled is false)"
    window = herd_window(settings)
    counted = (
        f"at their workload's measured p{100 * guard.quantile:g} use (at least "
        f"{guard.min_pods} pods), else their request x {guard.request_factor:g}"
        if guard.estimate == "usage"
        else "at their CPU request"
    )
    return f"herd guard: placed pods count {counted}; {window.fade(guard.settle)} ({window.why})"


def scores(args: argparse.Namespace) -> int:
    """One refresh, then a table: node, each metric raw and normalised, score, verdict."""
    from extender.cli.report import node_table
    from extender.cluster.connect import connect_kube
    from extender.decisions.explain import explain_nodes
    from extender.service.compose import build_service
    from extender.service.logs import quieted

    settings = load_settings(args.config, os.environ)
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


def doctor(args: argparse.Namespace) -> int:
    """A table of checks; exit 1 on any FAIL."""
    from extender.cluster.client import KubeClient, load_api_client
    from extender.doctor.backend import AskBuildInfo
    from extender.doctor.examine import examine
    from extender.doctor.prometheus import Query
    from extender.doctor.rows import exit_code, render
    from extender.errors.causes import describe
    from extender.metrics.providers import PrometheusProvider

    settings = load_settings(args.config, os.environ)
    query: Query | None = None
    build_info: AskBuildInfo | None = None
    if settings.provider == "prometheus":
        try:
            provider = PrometheusProvider(settings.prometheus)
            query, build_info = provider.query, provider.build_info
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

    async def examined() -> list[Any]:
        try:
            return await examine(settings, query, kube, kube_problem, build_info=build_info)
        finally:
            if kube is not None:
                await kube.close()

    rows = asyncio.run(examined())
    print(render(rows))
    return exit_code(rows)
