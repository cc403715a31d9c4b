"""The verbs on raw ASGI (https://asgi.readthedocs.io/en/latest/specs/www.html): a POST to
a verb's path skips Starlette's router, middleware, Request and Response (BENCHMARKS.md,
"The verbs on raw ASGI"). Protocol only: the rules are extender.service.verbs'.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


class ClientDisconnected(Exception):
    """The client went away before sending the whole body (starlette's ClientDisconnect)."""


def request_headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """(Content-Type, Content-Length) as sent, the first of each (as starlette's
    `Headers.get`); None when absent."""
    ctype = length = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            ctype = value if ctype is None else ctype
        elif name == b"content-length":
            length = value if length is None else length
    return ctype, length


async def read_body(receive: Receive, declared: bytes | None, limit: int) -> bytes:
    """The request body, refusing more than `limit` bytes before reading them all: at once
    when the declared Content-Length is over, else as soon as the chunks add up to more."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            if not message.get("more_body", False) and not chunks:
                return chunk  # all in one message, as the scheduler sends it: no copy
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnected


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """The whole answer: `headers` and Content-Length, then the body in one message."""
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class VerbFront:
    """In front of `app` (the Starlette app): a POST to exactly one of `endpoints`' paths
    goes straight to its endpoint; everything else goes to `app` (a GET there is a 405)."""

    __slots__ = ("_endpoints", "app")

    def __init__(self, endpoints: Mapping[str, ASGIApp], app: ASGIApp) -> None:
        self._endpoints = dict(endpoints)
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self._endpoints.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)
