"""`decice-extender check-config`: validate a policy file and exit."""

from __future__ import annotations

import argparse
import sys

from extender.cli.common import load
from extender.policy.fields import ConfigError


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    c.set_defaults(func=run)


def _seconds(text: str) -> float:
    """A Go duration flag (validated as scheduler-config does) in seconds."""
    from extender.policy.scheduler_config import duration_ns, go_duration

    return (duration_ns(go_duration(text)) or 0) / 1e9


def run(args: argparse.Namespace) -> int:
    from extender.policy.checks import policy_problems

    path = args.config_flag or args.config
    if path is None:
        print("decice-extender check-config: give the policy file: --config FILE", file=sys.stderr)
        return 2
    settings = load(path)
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
