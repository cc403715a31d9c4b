"""`decice-extender check-config`: validate a policy file and exit."""

from __future__ import annotations

import argparse
import sys

from extender.cli.common import load
from extender.policy.fields import ConfigError
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
    c.set_defaults(func=run)


def _seconds(text: str) -> float:
    """A Go duration flag (validated as scheduler-config does) in seconds."""
    from extender.policy.scheduler_config import go_duration
    from extender.policy.windows import GO_UNITS, duration

    return duration(go_duration(text), GO_UNITS) or 0.0


def run(args: argparse.Namespace) -> int:
    from extender.policy.checks import policy_problems

    path = args.config
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
    print(herd_guard_line(settings))
    return 0


def herd_guard_line(settings: Settings) -> str:
    """How the herd guard will count placed pods under this policy: its window and why,
    and what it counts them at."""
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
    fade = f"then fading over {window.seconds:g}s" if window.seconds else "then gone at once"
    whole = f"whole for {guard.settle:g}s"
    return f"herd guard: placed pods count {counted}; {whole}, {fade} ({window.why})"
