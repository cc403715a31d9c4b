"""An exception reduced to its cause ("connection refused to 127.0.0.1:9090"), not a URL
holding the whole PromQL: the one place that turns an error into operator text, redacted,
one line. Library types are recognised by name, not imported."""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Iterator

from extender.errors.redaction import redact

MAX_LENGTH = 300
_EXCERPT = 120
_CHAIN_LIMIT = 32


class HTTPStatusError(Exception):
    """A server answered with an error status; the body is kept for its excerpt."""

    def __init__(self, status: int, body: bytes = b"", source: str = "Prometheus") -> None:
        super().__init__(status, body, source)
        self.status = status
        self.body = body
        self.source = source

    def __str__(self) -> str:
        try:
            doc = json.loads(self.body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("status") == "error":
            kind = doc.get("errorType") or "error"
            return f"{self.source} query error: {kind}: {doc.get('error') or '(no message)'}"
        start = excerpt(self.body)
        return f"HTTP {self.status} from {self.source}" + (f": {start}" if start else "")


class BadAnswer(Exception):
    """A server answered 200 with something that is not what we asked for; the message
    is operator text already."""


class PartialAnswer(BadAnswer):
    """An answer the server marked partial (Thanos' warnings, VictoriaMetrics' isPartial):
    some nodes may be missing from `result`."""

    def __init__(self, message: str, result: list[object]) -> None:
        super().__init__(message)
        self.result = result


def describe(exc: BaseException) -> str:
    """One line for logs, /readyz and CLI warnings: the cause of `exc`, redacted."""
    text = " ".join(cause(exc).split())
    text = redact(_QUERY.sub("?...", text))
    return text if len(text) <= MAX_LENGTH else text[: MAX_LENGTH - 3] + "..."


def cause(exc: BaseException) -> str:
    """The cause of `exc` in words (not yet redacted nor bounded: use `describe`)."""
    chain = list(walk(exc))
    for reduce in _REDUCERS:
        found = reduce(chain)
        if found is not None:
            return found
    text = _first_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def walk(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception behind it, breadth first, each once."""
    seen: set[int] = set()
    queue = [exc]
    while queue and len(seen) < _CHAIN_LIMIT:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        behind: list[object] = [current.__cause__, current.__context__]
        # urllib3's MaxRetryError.reason, aiohttp's ClientConnectorError.os_error
        behind += [_attribute(current, "reason"), _attribute(current, "os_error"), *current.args]
        if isinstance(current, BaseExceptionGroup):
            behind.extend(current.exceptions)
        queue.extend(e for e in behind if isinstance(e, BaseException))


# A URL's query string (PromQL, sometimes a token): `?key=...` after a path or host.
_QUERY = re.compile(r"(?<=[\w/])\?[\w%.~+-]+=[^\s'\")]*")
_HOST_PORT = re.compile(r"host='([^']+)', port=(\d+)")
_TIMEOUT_VALUE = re.compile(r"(?:read|connect) timeout=([0-9.]+)")
_RESOLVE = re.compile(r"Failed to resolve '([^']+)'")
_SSL_TEXT = re.compile(r"^\[[^\]]*\]\s*|\s*\(_ssl\.c:\d+\)")
_TAGS = re.compile(r"<[^>]*>")


def _told(chain: list[BaseException]) -> str | None:
    """Errors whose text is written for the operator already (ours, and KubeError)."""
    if _named(chain[0], "KubeError"):
        return str(chain[0]) or type(chain[0]).__name__
    told = next((e for e in chain if isinstance(e, HTTPStatusError | BadAnswer)), None)
    return None if told is None else str(told) or type(told).__name__


def _name_resolution(chain: list[BaseException]) -> str | None:
    for exc in chain:
        if isinstance(exc, socket.gaierror) or _named(exc, "NameResolutionError"):
            named = (m.group(1) for e in chain if (m := _RESOLVE.search(_first_line(e))))
            address = _address(chain)
            host = next(named, None) or (address and address.rsplit(":", 1)[0].strip("[]"))
            host = host or "the server"
            reason = next(
                (e.strerror for e in chain if isinstance(e, socket.gaierror) and e.strerror), None
            )
            return f"name resolution failed for {host}" + (f" ({reason})" if reason else "")
    return None


def _tls(chain: list[BaseException]) -> str | None:
    for exc in chain:
        if isinstance(exc, ssl.SSLCertVerificationError):
            detail = exc.verify_message or _ssl_text(exc)
            return "TLS: certificate verify failed" + (f": {detail}" if detail else "")
    for exc in chain:
        if isinstance(exc, ssl.SSLError):
            detail = _ssl_text(exc) or type(exc).__name__
            if exc.reason == "WRONG_VERSION_NUMBER":
                detail += " (does the server speak plain HTTP?)"
            return f"TLS: {detail}"
    return None


def _timeout(chain: list[BaseException]) -> str | None:
    for exc in chain:
        if _is_timeout(exc):
            connect = any(_is_timeout(e, "ConnectTimeout", "ConnectTimeoutError") for e in chain)
            seconds = next(
                (m.group(1) for e in chain if (m := _TIMEOUT_VALUE.search(str(e)))), None
            )
            text = "connect timeout" if connect else "timeout"
            if seconds is not None:
                text += f" after {float(seconds):g}s"
            where = _at(chain, f" {'to' if connect else 'waiting for'} {{}}")
            if not where and seconds is None and str(exc) not in ("", "timed out"):
                where = f" ({_first_line(exc)})"
            return text + where
    return None


def _is_timeout(exc: BaseException, *names: str) -> bool:
    # urllib3's NewConnectionError derives from ConnectTimeoutError (history): not a timeout.
    if _named(exc, "NewConnectionError"):
        return False
    if not names:
        return isinstance(exc, TimeoutError) or _named(exc, "Timeout", "TimeoutError")
    return _named(exc, *names)


def _refused(chain: list[BaseException]) -> str | None:
    if any(isinstance(exc, ConnectionRefusedError) for exc in chain):
        return "connection refused" + _at(chain, " to {}")
    return None


def _closed(chain: list[BaseException]) -> str | None:
    for exc in chain:
        if _named(exc, "RemoteDisconnected", "ServerDisconnectedError"):
            return f"connection closed by {_address(chain) or 'the server'} before it answered"
        if isinstance(exc, ConnectionResetError):
            return "connection reset" + _at(chain, " by {}")
    return None


def _not_json(chain: list[BaseException]) -> str | None:
    for exc in chain:
        if isinstance(exc, json.JSONDecodeError):
            return f"answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    return None


def _os_error(chain: list[BaseException]) -> str | None:
    """Any other system error with a number: unreachable networks, unreadable files."""
    for exc in chain:
        if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
            if exc.filename is not None:
                return f"{exc.filename}: {exc.strerror}"
            return exc.strerror + _at(chain, " ({})")
    return None


_REDUCERS = (_told, _name_resolution, _tls, _refused, _timeout, _closed, _not_json, _os_error)


def _named(exc: BaseException, *names: str) -> bool:
    """`exc`'s class or a base of it has one of `names` (duck-typed: no library imported)."""
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def _attribute(obj: object, name: str) -> object:
    try:
        return getattr(obj, name, None)
    except Exception:  # a property that raises tells us nothing
        return None


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return ""
    return text.strip().splitlines()[0] if text.strip() else ""


def _address(chain: list[BaseException]) -> str | None:
    """host:port of the server the chain is about, when one of its exceptions says."""
    for exc in chain:
        holder = _attribute(exc, "conn")  # urllib3 NewConnectionError: the connection
        for candidate in (holder, exc):  # aiohttp ClientConnectorError: host and port
            host, port = _attribute(candidate, "host"), _attribute(candidate, "port")
            if isinstance(host, str) and host and isinstance(port, int):
                return _join(host, port)
    for exc in chain:
        if (m := _HOST_PORT.search(_first_line(exc))) is not None:
            return _join(m.group(1), int(m.group(2)))
    return None


def _at(chain: list[BaseException], template: str) -> str:
    """`template` filled with the chain's host:port, or "" when it names none."""
    address = _address(chain)
    return template.format(address) if address else ""


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _ssl_text(exc: ssl.SSLError) -> str:
    text = exc.strerror if isinstance(exc.strerror, str) else _first_line(exc)
    return _SSL_TEXT.sub("", text or "").strip()


def excerpt(body: bytes | str) -> str:
    """The first line of an answer's body with text in it, tags dropped, shortened."""
    text = body[:2048] if isinstance(body, str) else body[:2048].decode("utf-8", "replace")
    lines = (" ".join(line.split()) for line in _TAGS.sub(" ", text).splitlines())
    text = next((line for line in lines if line), "")
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
