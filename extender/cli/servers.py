"""Serving apps with uvicorn: one event loop, one process, a clean exit on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from extender.policy.settings import Settings
from extender.service import logs

log = logging.getLogger("decice")

Listener = tuple[Any, str, int, dict[str, Any]]
"""(ASGI app, host, port, uvicorn options)."""


def run_servers(
    settings: Settings,
    args: argparse.Namespace,
    log_format: logs.LogFormat,
    apps: list[Listener],
) -> None:
    """Serve each (app, host, port, options) with uvicorn on one loop until SIGTERM."""
    import uvicorn
    import uvloop

    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # that was installed before it: make that one a no-op so a clean shutdown exits 0.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    common: dict[str, Any] = {
        "loop": "uvloop",
        "http": "httptools",
        "access_log": False,
        "log_level": args.log_level.lower(),
        "log_config": logs.uvicorn_log_config(args.log_level, log_format),
        "timeout_graceful_shutdown": int(settings.server.grace_period + 0.999),
    }
    servers = []
    for i, (app, host, port, options) in enumerate(apps):
        # The first app runs the lifespan (refresher, watches); the others share its state.
        extra: dict[str, Any] = {} if i == 0 else {"lifespan": "off"}
        config = uvicorn.Config(app, host=host, port=port, **common, **extra, **options)
        servers.append(uvicorn.Server(config))

    async def serve_all() -> None:
        await asyncio.gather(*(s.serve() for s in servers))

    uvloop.run(serve_all())
    log.info("stopped")
