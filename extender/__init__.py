"""decice-extender: a metrics-aware kube-scheduler extender.

`PACKAGES` and `LIBRARIES` below are the one source of the import rules (README.md,
Layout): tests/test_architecture.py checks every import against them, and that
pyproject.toml's import-linter contracts are the ones they generate.

The verbs' path, start to end: service.verbs reads the request, decisions.wire parses it,
decisions.engine decides from the tables the metrics.refresher built, decisions.wire
encodes the answer. Nothing on that path waits on Prometheus or the API server; bind is
cluster.binder, through cluster.client.
"""

from typing import NamedTuple

__version__ = "0.1.0"


class Package(NamedTuple):
    """One subpackage of extender: what it holds, and the subpackages it may import."""

    what: str
    may_import: tuple[str, ...]


EVERY_PACKAGE = ("*",)
"""`may_import` of a subpackage that may import every other one."""

PACKAGES: dict[str, Package] = {
    "errors": Package(
        "failures turned into one safe line of operator text, and the one back-off policy "
        "of every retry loop",
        (),
    ),
    "policy": Package(
        "the policy language: models, loading, live reload, the generated reference, "
        "check-config's checks, scheduler-config",
        ("errors",),
    ),
    "decisions": Package(
        "pure: snapshot model, pods, scoring, tables, the engine, the herd guard, "
        "explanations, the wire format",
        ("policy",),
    ),
    "metrics": Package(
        "where node values come from: providers, the refresher, range queries for replay",
        ("decisions", "policy", "errors"),
    ),
    "cluster": Package(
        "the Kubernetes edge: the API client (client/), watches, leader election (leader/), "
        "bind, Events, requeue",
        ("decisions", "policy", "errors"),
    ),
    "rebalancing": Package(
        "which running pods to move (the plan, pure), and the loop that evicts them "
        "(through cluster.kubeapi, while cluster.leader's Lease is held)",
        ("cluster", "decisions", "policy", "errors"),
    ),
    "doctor": Package(
        "checks of a policy against a live Prometheus and cluster",
        ("metrics", "cluster", "decisions", "policy", "errors"),
    ),
    "service": Package(
        "the HTTP service: routes, OpenAPI, telemetry, logs, and the composition root "
        "(a builder per mode: build_service, build_rebalancer, build_shadow)",
        ("cluster", "rebalancing", "metrics", "decisions", "policy", "errors"),
    ),
    "simulation": Package(
        "a seeded simulation of placements, kube-scheduler's default scoring against ours "
        "and the peers' (peers/: Trimaran, Koordinator), our rebalancer's plan included "
        "(pure; `decice-extender simulate` prints it)",
        ("rebalancing", "decisions", "policy"),
    ),
    "replay": Package(
        "the user's own Prometheus history replayed under each scheduler model (range "
        "queries through metrics.history; the rest pure)",
        ("simulation", "metrics", "decisions", "policy", "errors"),
    ),
    "cli": Package(
        "the `decice-extender` command, a module per command or kin of commands", EVERY_PACKAGE
    ),
}
"""subpackage -> what it is and what it may import (besides itself)."""

LIBRARIES: dict[str, tuple[str, ...]] = {
    "kubernetes": ("cluster",),
    "aiohttp": ("cluster", "cli"),
    "prometheus_api_client": ("metrics",),
    "requests": ("metrics",),
    "starlette": ("service", "cli"),
    "uvicorn": ("service", "cli"),
    "uvloop": ("service", "cli"),
    "prometheus_client": ("service", "cli"),
}
"""outside library -> the only subpackages that may import it."""
