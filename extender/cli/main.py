"""The `decice-extender` console script: each command module adds its own subparsers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from extender import __version__
from extender.cli import check, replay, report, scheduler_config, serve, simulate
from extender.policy.fields import ConfigError

COMMANDS = (serve, report, check, scheduler_config, simulate, replay)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="decice-extender", description="A metrics-aware kube-scheduler extender."
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_to(sub)
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
