"""An ASGI app called in this process, no server and no network: the messages of the ASGI
spec's HTTP and lifespan protocols (https://asgi.readthedocs.io/en/latest/specs/), fed
and collected by hand, so that a test chooses how the body arrives (in chunks, or cut by
a disconnect) and sees exactly what the app sent.

    answer = await call(app, "POST", "/filter", [body], JSON)
    async with lifespan(service.app):
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Scope

JSON = {"content-type": "application/json"}


@dataclass
class Answer:
    """What the app sent: the start message's status and headers, the body's bytes."""

    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    messages: list[Message] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        """The first header called `name` (lower case), decoded."""
        wanted = name.encode()
        return next((v.decode("latin-1") for k, v in self.headers if k == wanted), None)

    def json(self) -> Any:
        return orjson.loads(self.body)


def http_scope(method: str, path: str, headers: Mapping[str, str] = JSON) -> Scope:
    """An HTTP connection scope as uvicorn builds it: lower-case byte header names."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8888),
        "state": {},
    }


def body_messages(chunks: Sequence[bytes], disconnect: bool = False) -> list[Message]:
    """`http.request` messages carrying `chunks` in order; with `disconnect`, every one says
    more is coming and an `http.disconnect` follows instead of the end."""
    last = len(chunks) - 1
    out: list[Message] = [
        {"type": "http.request", "body": chunk, "more_body": disconnect or i < last}
        for i, chunk in enumerate(chunks)
    ]
    if disconnect:
        out.append({"type": "http.disconnect"})
    return out


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    chunks: Sequence[bytes] = (b"",),
    headers: Mapping[str, str] = JSON,
    *,
    disconnect: bool = False,
) -> Answer:
    """One request: the body as `chunks` (see `body_messages`); once they are read, the
    app hears `http.disconnect`, as a server says after the response. An exception the app
    raises propagates (`call_raising` keeps what was sent before it)."""
    answer = Answer()
    await _serve(app, http_scope(method, path, headers), chunks, disconnect, answer)
    return answer


async def call_raising(
    app: ASGIApp, method: str, path: str, chunks: Sequence[bytes], headers: Mapping[str, str]
) -> tuple[Answer, BaseException | None]:
    """`call`, keeping what the app sent when it raises, and what it raised."""
    answer = Answer()
    try:
        await _serve(app, http_scope(method, path, headers), chunks, False, answer)
    except Exception as exc:
        return answer, exc
    return answer, None


async def _serve(
    app: ASGIApp, scope: Scope, chunks: Sequence[bytes], disconnect: bool, answer: Answer
) -> None:
    pending = deque(body_messages(chunks, disconnect))

    async def receive() -> Message:
        return pending.popleft() if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        answer.messages.append(message)
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    await app(scope, receive, send)


@contextlib.asynccontextmanager
async def lifespan(app: ASGIApp) -> AsyncIterator[None]:
    """The app's lifespan as a server runs it: startup before the block, shutdown after; a
    failed startup raises what the app raised."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}

    async def run() -> None:
        await app(scope, inbox.get, outbox.put)

    task = asyncio.create_task(run())

    async def reply() -> Message:
        """The app's next message, or what it raised if it ended without one."""
        got = asyncio.ensure_future(outbox.get())
        await asyncio.wait({got, task}, return_when=asyncio.FIRST_COMPLETED)
        if not got.done():
            got.cancel()
            await task  # raises what the app raised
            raise AssertionError("the app ended its lifespan without a reply")
        return got.result()

    await inbox.put({"type": "lifespan.startup"})
    started = await reply()
    if started["type"] != "lifespan.startup.complete":
        await task
        raise AssertionError(f"startup: {started}")
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        stopped = await reply()
        await task
        assert stopped["type"] == "lifespan.shutdown.complete", stopped
