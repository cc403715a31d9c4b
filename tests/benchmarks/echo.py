"""The echo floor: a bare starlette endpoint that answers the request body unchanged.

Served exactly like the extender (`extender.cli.serve`): uvicorn, one worker,
uvloop, httptools, no access log. `python tests/benchmarks/echo.py PORT`.
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route


async def echo(request: Request) -> Response:
    try:
        body = await request.body()
    except ClientDisconnect:  # wrk hangs up mid-body when its time is up
        body = b""
    return Response(body, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b"ok\n", media_type="text/plain")


app = Starlette(
    routes=[Route("/healthz", healthz, methods=["GET"]), Route("/{verb}", echo, methods=["POST"])]
)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )
