"""The do-nothing extender: the floor a real kube-scheduler pays for any HTTP extender.

Served exactly like ours (`extender.cli.serve`): uvicorn, one worker, uvloop,
httptools, no access log. `python tests/benchmarks/donothing.py PORT`.

- `POST /filter`: every node it was asked passes (`NodeNames` in, the same `NodeNames`
  out, `FailedNodes: {}`; the full `Nodes` list likewise when it was sent instead);
- `POST /prioritize`: `[]` (kube-scheduler reads a host missing from the answer as score
  0, so every node scores 0); the body is read, not parsed;
- `POST /preempt`: the scheduler's candidates unchanged (`NodeNameToMetaVictims`, or
  `NodeNameToVictims` when it sent full objects);
- `GET /healthz`: 200.

- `POST /bind`, only when `KUBECONFIG` is set: the Binding posted through our Kubernetes
  client (extender.cluster.client: kept-alive connections, retries, errors mapped), and
  nothing else: no check, no reservation, no Event. The floor of any extender in Python
  that owns bindVerb.

tests/benchmarks/realburst.py runs it as its `donothing` variant (no bind verb: the
scheduler binds) and `donothing-bind` (bindVerb, KUBECONFIG set).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

JSON_TYPE = "application/json"


def filter_answer(args: dict[str, Any]) -> bytes:
    """Every node passes: the names (or Node objects) it was sent, nothing failed."""
    names = args.get("NodeNames")
    if names is None and args.get("Nodes") is not None:
        return orjson.dumps({"Nodes": args["Nodes"], "FailedNodes": {}, "Error": ""})
    return orjson.dumps({"NodeNames": names, "FailedNodes": {}, "Error": ""})


def preempt_answer(args: dict[str, Any]) -> bytes:
    """The candidate nodes and their victims, unchanged."""
    if args.get("NodeNameToMetaVictims") is not None:
        return orjson.dumps({"NodeNameToMetaVictims": args["NodeNameToMetaVictims"]})
    return orjson.dumps({"NodeNameToVictims": args.get("NodeNameToVictims") or {}})


async def filter_nodes(request: Request) -> Response:
    args = orjson.loads(await request.body())
    return Response(filter_answer(args), media_type=JSON_TYPE)


async def prioritize(request: Request) -> Response:
    await request.body()
    return Response(b"[]", media_type=JSON_TYPE)


async def preempt(request: Request) -> Response:
    args = orjson.loads(await request.body())
    return Response(preempt_answer(args), media_type=JSON_TYPE)


def binder() -> Any:
    """Our Kubernetes client from $KUBECONFIG, or None."""
    path = os.environ.get("KUBECONFIG")
    if not path:
        return None
    from extender.cluster.client import KubeClient, load_api_client

    return KubeClient(load_api_client(path).configuration)


KUBE = binder()


async def bind(request: Request) -> Response:
    args = orjson.loads(await request.body())
    try:
        await KUBE.bind(args["PodNamespace"], args["PodName"], args["PodUID"], args["Node"])
        error = ""
    except Exception as exc:
        error = f"bind failed: {exc}"
    return Response(orjson.dumps({"Error": error}), media_type=JSON_TYPE)


async def healthz(request: Request) -> Response:
    return Response(b"ok\n", media_type="text/plain")


app = Starlette(
    routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/filter", filter_nodes, methods=["POST"]),
        Route("/prioritize", prioritize, methods=["POST"]),
        Route("/preempt", preempt, methods=["POST"]),
        *([Route("/bind", bind, methods=["POST"])] if KUBE is not None else []),
    ]
)


def main(argv: list[str]) -> None:
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(argv[0]),
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main(sys.argv[1:])
