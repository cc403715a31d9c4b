"""What `check-config` catches beyond loading: what the policy alone does not know (the
scheduler's httpTimeout), or what must not stop a running service (a PromQL parser whose
dialect may trail the server's)."""

from __future__ import annotations

import promql_parser

from extender.policy.settings import Settings


def query_problem(query: str) -> str | None:
    """Why Prometheus would refuse this PromQL, as promql-parser reads it; None if it parses."""
    try:
        promql_parser.parse(query)
    except ValueError as exc:
        return str(exc).splitlines()[0] if str(exc) else "does not parse"
    return None


def policy_problems(settings: Settings, http_timeout: float) -> list[str]:
    """Every problem of a loaded policy, for a scheduler's httpTimeout in seconds."""
    problems: list[str] = []
    if settings.provider == "prometheus":
        for path, metric in settings.metric_paths():
            problem = query_problem(metric.query)
            if problem is not None:
                problems.append(f"{path}.query: PromQL error: {problem}")
    bind = settings.bind
    if bind.enabled and bind.budget >= http_timeout:
        problems.append(
            f"bind: timeout {bind.timeout:g}s x {bind.retries + 1} attempts plus back-off "
            f"is {bind.budget:g}s, not under the scheduler's httpTimeout {http_timeout:g}s: "
            "the scheduler gives up before our answer; lower bind.timeout or bind.retries, "
            "or raise httpTimeout (--http-timeout here)"
        )
    return problems
