"""extender.errors.causes: an exception reduced to its cause, from real failures of the Prometheus
client on 127.0.0.1 (refused, silent, 503, a query error, an unknown name, TLS) and from
exception chains built by hand."""

from __future__ import annotations

import itertools
import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from http.client import RemoteDisconnected
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests
import trustme
from urllib3.connection import HTTPConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from extender.cli.main import main
from extender.decisions.model import NodeInventory
from extender.errors.causes import BadAnswer, HTTPStatusError, cause, describe, walk
from extender.metrics.providers import PrometheusProvider
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from tests.harness.loopback import LOCALHOST, LoopbackServer, free_port

SECRET = "s3cr3t-t0ken"


def prometheus(url: str, timeout: float = 2.0, **extra: Any) -> Settings:
    return parse_settings(
        {
            "provider": "prometheus",
            "prometheus": {"url": url, "timeout": timeout, **extra},
            "metrics": [{"name": "cpu", "query": 'max by (node) (rate(x{job="n"}[1m]))'}],
        }
    )


def fetch_error(settings: Settings) -> str:
    """What the refresher shows when the provider's fetch of `cpu` fails."""
    provider = PrometheusProvider(settings.prometheus)
    with pytest.raises(Exception) as caught:
        provider.fetch(settings.default.metrics[0], NodeInventory())
    return describe(caught.value)


class Answer(BaseHTTPRequestHandler):
    """Answers every GET with the class's status and body."""

    status: ClassVar[int] = 200
    body: ClassVar[bytes] = b""

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def answering(status: int, body: bytes) -> LoopbackServer:
    handler = type("Fixed", (Answer,), {"status": status, "body": body})
    return LoopbackServer(handler, name="fake-prometheus")


# --- real failures on the loopback ------------------------------------------------------------


def test_a_closed_port_is_connection_refused() -> None:
    port = free_port()
    assert fetch_error(prometheus(f"http://{LOCALHOST}:{port}")) == (
        f"connection refused to 127.0.0.1:{port}"
    )


@pytest.fixture
def silent() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind((LOCALHOST, 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def test_a_server_that_never_answers_is_a_timeout_after_the_configured_seconds(
    silent: int,
) -> None:
    assert fetch_error(prometheus(f"http://{LOCALHOST}:{silent}", timeout=0.2)) == (
        f"timeout after 0.2s waiting for 127.0.0.1:{silent}"
    )


def test_503_is_the_status_and_the_first_line_of_the_body_without_credentials() -> None:
    body = f"Service Unavailable\nAuthorization: Bearer {SECRET}".encode()
    with answering(503, body) as server:
        assert (
            fetch_error(prometheus(server.url)) == "HTTP 503 from Prometheus: Service Unavailable"
        )
    echoed = f"unauthorized: Authorization: Bearer {SECRET}".encode()
    with answering(401, echoed) as server:
        text = fetch_error(prometheus(server.url))
    assert text == "HTTP 401 from Prometheus: unauthorized: Authorization: Bearer <redacted>"


def test_a_query_error_is_its_type_and_message() -> None:
    body = (
        b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\": '
        b'1:5: parse error: unexpected <op:*>"}'
    )
    with answering(400, body) as server:
        assert fetch_error(prometheus(server.url)) == (
            'Prometheus query error: bad_data: invalid parameter "query": 1:5: parse error: '
            "unexpected <op:*>"
        )


def test_a_200_that_is_not_a_query_result() -> None:
    with answering(200, b"<html><body>\n<h1>Sign in</h1></body></html>") as server:
        assert fetch_error(prometheus(server.url)) == (
            "Prometheus answered 200 but not JSON: Sign in"
        )
    with answering(200, b'{"status":"success"}') as server:
        assert fetch_error(prometheus(server.url)) == (
            "Prometheus answered 200 without data.result"
        )


def test_an_unknown_host_name_fails_resolution() -> None:
    # .invalid never resolves (RFC 6761), online or not.
    text = fetch_error(prometheus("http://nonexistent.invalid:9090"))
    assert text.startswith("name resolution failed for nonexistent.invalid"), text


def test_a_certificate_we_do_not_trust(tmp_path: Path) -> None:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(LOCALHOST).configure_cert(context)
    server = ThreadingHTTPServer((LOCALHOST, 0), Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        url = f"https://{LOCALHOST}:{server.server_address[1]}"
        text = fetch_error(prometheus(url))
        assert text.startswith("TLS: certificate verify failed: "), text
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        settings = prometheus(url, caFile=str(ca_file))  # trusted: the answer is read
        with pytest.raises(BadAnswer):
            PrometheusProvider(settings.prometheus).fetch(
                settings.default.metrics[0], NodeInventory()
            )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_plain_http_to_an_https_url_is_named() -> None:
    with answering(200, b"{}") as server:
        text = fetch_error(prometheus(server.url.replace("http:", "https:")))
    assert text == "TLS: wrong version number (does the server speak plain HTTP?)"


def test_an_unreadable_token_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "token"
    with answering(200, b"{}") as server:
        text = fetch_error(prometheus(server.url, bearerTokenFile=str(missing)))
    assert text == f"prometheus.bearerTokenFile: cannot read {missing}: No such file or directory"


# --- chains built by hand ---------------------------------------------------------------------


def chained(*layers: BaseException) -> BaseException:
    """layers[0] raised from layers[1] raised from ... (outermost first)."""
    for outer, inner in itertools.pairwise(layers):
        outer.__cause__ = inner
    return layers[0]


def requests_error(reason: BaseException, url: str = "/api/v1/query?query=up") -> BaseException:
    """What requests raises: ConnectionError(MaxRetryError) with the retry error as context."""
    retry = MaxRetryError(None, url, reason)  # type: ignore[arg-type]
    error = requests.ConnectionError(retry)
    error.__context__ = retry
    return error


CONN = HTTPConnection("10.0.0.7", 9090)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            requests_error(
                chained(
                    NewConnectionError(CONN, "Failed to establish a new connection"),
                    ConnectionRefusedError(111, "Connection refused"),
                )
            ),
            "connection refused to 10.0.0.7:9090",
        ),
        (
            requests_error(
                chained(
                    NameResolutionError("prometheus.example", CONN, socket.gaierror(-2, "x")),
                    socket.gaierror(-2, "Name or service not known"),
                )
            ),
            "name resolution failed for prometheus.example (Name or service not known)",
        ),
        (
            requests_error(ConnectTimeoutError(CONN, "Connection timed out. (connect timeout=5)")),
            "connect timeout after 5s to 10.0.0.7:9090",
        ),
        (
            requests.ReadTimeout(
                ReadTimeoutError(
                    None,  # type: ignore[arg-type]
                    "/api/v1/query",
                    "HTTPConnectionPool(host='prom', port=9090): Read timed out. "
                    "(read timeout=2.5)",
                )
            ),
            "timeout after 2.5s waiting for prom:9090",
        ),
        (
            requests.ConnectionError(
                ProtocolError("Connection aborted.", RemoteDisconnected("closed"))
            ),
            "connection closed by the server before it answered",
        ),
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset"),
        (OSError(113, "No route to host"), "No route to host"),
        (TimeoutError(), "timeout"),
        (TimeoutError("read timed out"), "timeout (read timed out)"),
        (HTTPStatusError(502, b"<html><title>502 Bad Gateway</title></html>"), None),
        (HTTPStatusError(503, b""), "HTTP 503 from Prometheus"),
        (RuntimeError("boom\nsecond line"), "RuntimeError: boom"),
        (KeyError("data"), "KeyError: 'data'"),
        (ValueError(), "ValueError"),
    ],
)
def test_chains(exc: BaseException, expected: str | None) -> None:
    if expected is None:
        expected = "HTTP 502 from Prometheus: 502 Bad Gateway"
    assert describe(exc) == expected


def test_a_ssl_verify_error_says_why() -> None:
    exc = ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: x (_ssl.c:1000)"
    )
    exc.verify_message = "self-signed certificate"
    assert describe(requests.exceptions.SSLError(exc)) == (
        "TLS: certificate verify failed: self-signed certificate"
    )


def test_a_connector_error_with_host_and_port_attributes() -> None:
    """aiohttp's ClientConnectorError (the Kubernetes client) carries host, port, os_error."""

    class ClientConnectorError(OSError):
        host = "10.96.0.1"
        port = 443
        os_error = ConnectionRefusedError(111, "Connect call failed")

    assert describe(ClientConnectorError("Cannot connect")) == "connection refused to 10.96.0.1:443"


def test_ipv6_addresses_are_bracketed() -> None:
    error = requests_error(
        chained(
            NewConnectionError(HTTPConnection("fd00::1", 9090), "refused"),
            ConnectionRefusedError(111, "Connection refused"),
        )
    )
    assert describe(error) == "connection refused to [fd00::1]:9090"


def test_operator_text_is_kept() -> None:
    class KubeError(Exception):
        pass

    class KubeUnavailable(KubeError):
        pass

    error = KubeUnavailable("Kubernetes API Unreachable: GET /api/v1/nodes: connection refused")
    error.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert describe(error) == "Kubernetes API Unreachable: GET /api/v1/nodes: connection refused"
    assert describe(BadAnswer("Prometheus answered 200 without data.result")) == (
        "Prometheus answered 200 without data.result"
    )


def test_secrets_never_show() -> None:
    query = f"/api/v1/query?query=up&token={SECRET}"
    unknown = requests.ConnectionError(f"HTTPConnectionPool(host='p', port=1): url: {query}")
    text = describe(unknown)
    assert SECRET not in text and "?..." in text
    assert describe(RuntimeError(f"GET https://admin:{SECRET}@prom/api")) == (
        "RuntimeError: GET https://<redacted>@prom/api"
    )
    assert describe(RuntimeError(f"Authorization: Bearer {SECRET}")) == (
        "RuntimeError: Authorization: Bearer <redacted>"
    )
    body = f'{{"status":"error","errorType":"internal","error":"Basic {SECRET}"}}'.encode()
    assert describe(HTTPStatusError(500, body)) == (
        "Prometheus query error: internal: Basic <redacted>"
    )


def test_one_bounded_line() -> None:
    text = describe(RuntimeError("x" * 1000))
    assert len(text) == 300 and text.endswith("...")
    assert "\n" not in describe(HTTPStatusError(500, b"a\nb"))


def test_the_walk_ends_on_cycles_and_bad_str() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    assert [str(e) for e in walk(a)] == ["a", "b"]

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert cause(Unprintable()) == "Unprintable"
    group = ExceptionGroup("two", [ValueError("v"), ConnectionRefusedError(111, "refused")])
    assert describe(group) == "connection refused"


def test_the_scores_cli_warns_with_the_cause_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        json.dumps(
            {
                "provider": "prometheus",
                "prometheus": {"url": f"http://admin:{SECRET}@{LOCALHOST}:{port}", "timeout": 2},
                "bind": {"enabled": False},
                "kubernetes": {"watchPods": False},
                "metrics": [{"name": "cpu", "query": "up"}],
            }
        )
    )
    refresher = logging.getLogger("decice.refresher")
    level = refresher.level
    assert main(["scores", "--config", str(policy)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warning: metric cpu: connection refused to 127.0.0.1:{port}"]
    assert refresher.level == level  # quieted for the one refresh only
