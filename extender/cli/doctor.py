"""`decice-extender doctor`: check a policy against Prometheus and the cluster."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from extender.cli.common import load


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser(
        "doctor", help="check a policy against Prometheus and the cluster (exit 1 on FAIL)"
    )
    d.add_argument("--config", required=True, help="policy YAML file")
    d.add_argument("--timeout", type=float, default=10.0, help="per Kubernetes API call")
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """A table of checks; exit 1 on any FAIL."""
    from extender.cluster.client import KubeClient, load_api_client
    from extender.doctor.backend import AskBuildInfo
    from extender.doctor.examine import examine
    from extender.doctor.prometheus import Query
    from extender.doctor.rows import exit_code, render
    from extender.errors.causes import describe
    from extender.metrics.providers import PrometheusProvider

    settings = load(args.config)
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
