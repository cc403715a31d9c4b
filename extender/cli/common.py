"""What every command shares: reading the policy file, and the long-running commands'
logging flags."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from extender.policy.loading import load_settings
from extender.policy.settings import Settings


def load(path: str) -> Settings:
    """The policy file, with the environment's overrides (PROMETHEUS_URL, KUBECONFIG)."""
    return load_settings(Path(path), os.environ)


def log_options(command: argparse.ArgumentParser) -> None:
    """--log-level and --log-format, for the long-running commands."""
    command.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    command.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="text (default) or json lines; also $DECICE_LOG_FORMAT",
    )
