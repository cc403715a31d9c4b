"""What every command shares: reading the policy file, and the long-running commands'
logging flags."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extender.policy.loading import load_settings
from extender.policy.settings import Settings

if TYPE_CHECKING:
    from extender.service.logs import LogFormat


def load(path: str) -> Settings:
    """The policy file, with the environment's overrides (PROMETHEUS_URL, KUBECONFIG)."""
    return load_settings(Path(path), os.environ)


def started(args: argparse.Namespace) -> tuple[Settings, str, LogFormat]:
    """A long-running command's first steps: logging configured from --log-level and
    --log-format, then the policy read once (the hash /readyz shows is of the very bytes
    the settings came from). Returns (settings, sha256, log format)."""
    from extender.policy.reload import read_policy
    from extender.service import logs

    log_format = logs.log_format(args.log_format, os.environ)
    logs.configure_logging(args.log_level, log_format)
    settings, sha256 = read_policy(Path(args.config), os.environ)
    return settings, sha256, log_format


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


def fetch_json(url: str, timeout: float, command: str) -> Any:
    """GET a running service's JSON document (through aiohttp, the project's one HTTP
    client); None (the cause printed to stderr, naming `command`) when there is no answer
    or an error answer."""
    import aiohttp

    async def get() -> tuple[int, str, bytes]:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(url) as response,
        ):
            return response.status, response.reason or "", await response.read()

    base = url.split("?", 1)[0].rsplit("/", 1)[0]
    try:
        status, reason, body = asyncio.run(get())
        if status >= 400:
            try:
                message = json.loads(body).get("Error", "")
            except (ValueError, AttributeError):
                message = ""
            print(f"decice-extender {command}: {status}: {message or reason}", file=sys.stderr)
            return None
        return json.loads(body)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        cause = str(exc) or type(exc).__name__  # a timeout has no text of its own
        print(f"decice-extender {command}: cannot reach {base}: {cause}", file=sys.stderr)
    return None


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace(environ: Mapping[str, str]) -> str:
    """POD_NAMESPACE (the downward API), else the service account's, else "default"."""
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def identity(environ: Mapping[str, str]) -> str:
    """Who this replica is in a leader election: POD_NAME (the downward API), else
    host-pid."""
    return environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
