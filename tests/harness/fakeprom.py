"""A tiny fake Prometheus HTTP API on 127.0.0.1 for answers a real one will not give.

`/api/v1/query` answers what the test set last: a vector of series (`vector`), any
status and body (`raw`), or either after a delay (`delay`). Requests are recorded with
their headers and query strings. `/api/v1/status/buildinfo` answers 404 until
`build_info` sets what a backend says there (and the headers it adds to every answer).

    with FakePrometheus() as prom:
        prom.vector({"node-1": "0.2", "node-2": "NaN"})
        prom.raw(500, b"<html>oops</html>")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.harness.loopback import LoopbackServer

TS = 1_800_000_000.0


def series(labels: Mapping[str, Any], value: Any) -> dict[str, Any]:
    return {"metric": dict(labels), "value": [TS, value]}


def success(result: Any, result_type: str = "vector") -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": result_type, "result": result}}
    ).encode()


class FakePrometheus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._status = 200
        self._body = success([])
        self._delay = 0.0
        self._build_info: tuple[int, bytes] = (404, b"404 page not found\n")
        self._extra_headers: dict[str, str] = {}
        self._release = threading.Event()
        self.queries: list[dict[str, list[str]]] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if parts.path == "/api/v1/status/buildinfo":
                    (status, body), delay = fake._build_info, 0.0
                elif parts.path != "/api/v1/query":
                    status, body, delay = 404, b"404 page not found\n", 0.0
                else:
                    status, body, delay = fake._answer(
                        parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()}
                    )
                if delay:
                    fake._release.wait(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in fake._extra_headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = LoopbackServer(Handler, name="fake-prometheus")

    @property
    def url(self) -> str:
        return self._server.url

    # -- control
    def vector(self, values: Mapping[str, Any], label: str = "node") -> None:
        """One series per node, `label`=node, value as given (a string, like Prometheus)."""
        self.series([series({label: n}, v) for n, v in values.items()])

    def series(self, result: Sequence[Any]) -> None:
        self.raw(200, success(list(result)))

    def raw(self, status: int, body: bytes) -> None:
        with self._lock:
            self._status, self._body, self._delay = status, body, 0.0

    def build_info(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        """What /api/v1/status/buildinfo answers (`body` as JSON unless bytes), and
        headers sent with every answer (VictoriaMetrics' X-Server-Hostname)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self._lock:
            self._build_info = (status, raw)
            self._extra_headers = dict(headers or {})

    def delay(self, seconds: float) -> None:
        """Answer the current body only after `seconds` (past the client's timeout)."""
        with self._lock:
            self._delay = seconds

    def _answer(
        self, query: dict[str, list[str]], headers: dict[str, str]
    ) -> tuple[int, bytes, float]:
        with self._lock:
            self.queries.append(query)
            self.headers.append(headers)
            return self._status, self._body, self._delay

    # -- lifecycle
    def close(self) -> None:
        self._release.set()
        self._server.close()

    def __enter__(self) -> FakePrometheus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
