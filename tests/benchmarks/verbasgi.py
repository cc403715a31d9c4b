"""What Starlette's routing, Request and Response cost a verb, in process, no network.

    python -m tests.benchmarks.verbasgi [--nodes 1000] [--runs 3] [--calls 2000]

One service (bench.py's static policy of three metrics, herd guard on), one filter body
of `--nodes` cloud-style names in `NodeNames` form, called as an ASGI app with a fake
`receive` (the whole body in one message, as uvicorn gives the scheduler's) and `send`:

- handler: the filter handler alone (wire, engine, wire), the floor of every row;
- starlette route (before): the endpoint the verbs had before their raw ASGI front,
  copied here (`Request`, `read_body` over `request.stream()`, a `Response`), as a
  Starlette route over the same handler;
- starlette route, raw endpoint: the Starlette app the service keeps behind its front,
  its verb route calling the raw ASGI endpoint (routing and middleware, no Request);
- lean (served): the service's app, `Verbs.front`, which answers the POST itself.

Each row is µs per call: the median of `--runs` runs, each a bounded loop (at most
`--calls` calls or 2 s) over the rows in turn, so that drift hits every row alike. The
ratios compare each row with the lean one, whole and less the handler (the HTTP layer
alone). Prints numbers, asserts nothing; a run takes well under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message

from extender.decisions.wire import WireError
from extender.policy.loading import parse_settings
from extender.service.compose import Service, build_service
from extender.service.telemetry import Telemetry
from extender.service.verbs import (
    JSON_TYPE,
    BodyTooLarge,
    Handler,
    VerbFront,
    error_response,
    handlers,
)
from tests.benchmarks.bench import node_names, policy, request_body
from tests.harness.asgi import http_scope

SECONDS = 2.0


def before_route(path: str, handler: Handler, telemetry: Telemetry, limit: int) -> Route:
    """The filter's route as it was: `VerbEndpoint` over starlette's Request and Response
    (extender/service/verbs.py before the raw ASGI path; its rules, copied)."""

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    async def answer(request: Request) -> Response:
        started = time.perf_counter()
        ctype = request.headers.get("content-type")
        if ctype is not None and ctype.split(";", 1)[0].strip().lower() != JSON_TYPE:
            response = error_response(415, f"Content-Type must be {JSON_TYPE}, got {ctype!r:.80}")
        else:
            try:
                body = await read_body(request)
                response = Response(await handler(body, time.time()), media_type=JSON_TYPE)
            except WireError as exc:
                response = error_response(400, f"bad filter request: {exc}")
            except BodyTooLarge:
                response = error_response(
                    413, f"request body exceeds server.maxBodyBytes ({limit})"
                )
            except ClientDisconnect:
                response = error_response(400, "client disconnected before sending the whole body")
        elapsed = time.perf_counter() - started
        response.headers["Server-Timing"] = f"app;dur={elapsed * 1000:.3f}"
        telemetry.observe("filter", response.status_code, elapsed)
        return response

    return Route(path, answer, methods=["POST"], name="filter")


def asgi_call(app: ASGIApp, body: bytes) -> Callable[[], Awaitable[int]]:
    """One POST /filter of `body` to `app`: a fresh scope (Starlette writes into it), the
    body in one message; returns the status sent."""
    template = http_scope("POST", "/filter", {"content-type": JSON_TYPE})
    template["headers"].append((b"content-length", b"%d" % len(body)))
    request: Message = {"type": "http.request", "body": body, "more_body": False}

    async def once() -> int:
        status = 0

        async def receive() -> Message:
            return request

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(dict(template), receive, send)
        return status

    return once


def handler_call(handler: Handler, body: bytes) -> Callable[[], Awaitable[int]]:
    async def once() -> int:
        await handler(body, time.time())
        return 200

    return once


async def per_call_us(call: Callable[[], Awaitable[int]], calls: int) -> float:
    """Microseconds per call over at most `calls` calls or SECONDS."""
    assert await call() == 200  # and warm
    deadline = time.monotonic() + SECONDS
    done = 0
    start = time.perf_counter()
    while done < calls and time.monotonic() < deadline:
        await call()
        done += 1
    return (time.perf_counter() - start) / done * 1e6


async def rows(service: Service, body: bytes, calls: int, runs: int) -> dict[str, list[float]]:
    served = service.app
    assert isinstance(served, VerbFront)
    do_filter = handlers(service.engine, service.binder, service.telemetry)["filter"]
    limit = service.settings.server.max_body_bytes
    before = Starlette(routes=[before_route("/filter", do_filter, service.telemetry, limit)])
    variants = {
        "handler alone": handler_call(do_filter, body),
        "starlette route (before)": asgi_call(before, body),
        "starlette route, raw endpoint": asgi_call(served.app, body),
        "lean (served)": asgi_call(served, body),
    }
    out: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, call in variants.items():
            out[name].append(await per_call_us(call, calls))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--calls", type=int, default=5000)
    args = p.parse_args(argv)
    names = node_names(args.nodes)
    service = build_service(parse_settings(policy(names, port=8888)))
    body = request_body(names, "names")

    async def measure() -> dict[str, list[float]]:
        errors = await service.refresher.refresh_once()
        assert not errors, errors
        return await rows(service, body, args.calls, args.runs)

    measured = asyncio.run(measure())
    median = {name: statistics.median(values) for name, values in measured.items()}
    floor, lean = median["handler alone"], median["lean (served)"]
    print(f"POST /filter, {args.nodes:,} names ({len(body):,} bytes), µs per call")
    print(f"{'':<31}{'median':>9}  {'x lean':>7}  {'HTTP layer':>10}  {'x lean':>7}  runs")
    for name, values in measured.items():
        runs = ", ".join(f"{v:.1f}" for v in values)
        layer = median[name] - floor
        ratios = (
            f"{median[name] / lean:>7.2f}  {layer:>10.1f}  {layer / (lean - floor):>7.2f}"
            if name != "handler alone"
            else f"{'':>7}  {'':>10}  {'':>7}"
        )
        print(f"{name:<31}{median[name]:>9.1f}  {ratios}  ({runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
