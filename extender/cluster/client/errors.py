"""Every Kubernetes API or transport failure as a `KubeError`: callers never see aiohttp,
ssl or socket errors, and only the kinds production code tells apart get a class.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import aiohttp
import orjson

from extender.errors.redaction import redact

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_ALREADY_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')
_MAX_MESSAGE = 500


class KubeError(Exception):
    """A Kubernetes API call failed; `str()` is a one-line message for the operator."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = clean_message(message)
        #: `details` of the API's `Status` answer (causes, retryAfterSeconds...), or {}
        self.details: Mapping[str, Any] = details or {}
        super().__init__(self.message)

    def __str__(self) -> str:
        reason = self.reason or _phrase(self.status) or "error"
        if self.status is None:
            return f"Kubernetes API {reason}: {self.message}"
        return f"Kubernetes API {self.status} {reason}: {self.message}"


class KubeAlreadyBound(KubeError):
    """409: the pod is already assigned to `node` (the same node: a retry's success)."""

    def __init__(self, message: str, *, node: str, reason: str = "Conflict") -> None:
        super().__init__(message, status=409, reason=reason)
        self.node = node


class KubeUnavailable(KubeError):
    """Timeouts, refused connections, or 429/5xx answers: the ones worth a retry."""


class KubeEvictionRefused(KubeError):
    """429 to an eviction (a PodDisruptionBudget, or throttling); `causes`: messages,
    appended to `message`."""

    causes: tuple[str, ...]

    @classmethod
    def from_error(cls, err: KubeError) -> KubeEvictionRefused:
        details = err.details
        causes = tuple(
            clean_message(str(cause.get("message")))
            for cause in details.get("causes") or ()
            if isinstance(cause, dict) and cause.get("message")
        )
        message = f"{err.message} ({'; '.join(causes)})" if causes else err.message
        reason = err.reason or "TooManyRequests"
        refused = cls(message, status=err.status, reason=reason, details=details)
        refused.causes = causes
        return refused


def clean_message(message: str) -> str:
    redacted = redact(" ".join(message.split()))
    if len(redacted) > _MAX_MESSAGE:
        return redacted[: _MAX_MESSAGE - 3] + "..."
    return redacted


def _phrase(status: int | None) -> str:
    if status is None:
        return ""
    try:
        return HTTPStatus(status).phrase.replace(" ", "")
    except ValueError:
        return ""


def error_from_status(status: int, body: bytes | None, http_reason: str | None) -> KubeError:
    """Map an HTTP error answer (a `Status` object, usually) to our hierarchy."""
    message, reason = "", ""
    details: dict[str, Any] = {}
    if body:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or "")
            reason = str(doc.get("reason") or "")
            if isinstance(doc.get("details"), dict):
                details = doc["details"]
        else:
            message = body.decode("utf-8", "replace")
    reason = reason or _phrase(status) or (http_reason or "")
    message = message or http_reason or "no message"
    if status == 409:
        assigned = _ALREADY_ASSIGNED.search(message)
        if assigned:
            return KubeAlreadyBound(message, node=assigned.group(1), reason=reason)
    if status in _RETRYABLE_STATUS or status >= 500:
        return KubeUnavailable(message, status=status, reason=reason, details=details)
    return KubeError(message, status=status, reason=reason, details=details)


def _is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):  # aiohttp wraps; the ssl error may be the cause
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError | aiohttp.ClientSSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def error_from_transport(exc: BaseException, where: str, timeout: float | None) -> KubeError:
    """Map an aiohttp failure (no HTTP answer) to our hierarchy."""
    if _is_tls_failure(exc):
        return KubeError(f"TLS with {where} failed: {exc}", reason="TLSError")
    if isinstance(exc, TimeoutError):
        within = f" within {timeout:g} s" if timeout is not None else ""
        return KubeUnavailable(f"no answer from {where}{within}", reason="Timeout")
    if isinstance(exc, aiohttp.ClientConnectorError):
        cause = exc.os_error
        if isinstance(cause, socket.gaierror) or isinstance(exc, _DNS_ERRORS):
            text = f"cannot resolve {exc.host}: {cause.strerror or cause}"
        elif isinstance(cause, ConnectionRefusedError) or cause.errno == errno.ECONNREFUSED:
            text = f"cannot connect to {exc.host}:{exc.port}: connection refused"
        else:
            text = f"cannot connect to {exc.host}:{exc.port}: {cause.strerror or cause}"
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        text = f"{where} closed the connection before answering"
    elif isinstance(exc, aiohttp.ClientPayloadError):
        text = f"{where} closed the connection before the end of its answer"
    else:
        text = f"{where}: {str(exc) or type(exc).__name__}"
    return KubeUnavailable(text, reason="Unreachable")


def retryable(err: KubeError) -> bool:
    return isinstance(err, KubeUnavailable) and (
        err.status is None or err.status in _RETRYABLE_STATUS
    )


TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
# aiohttp >= 3.11 tells DNS failures apart.
_DNS_ERRORS: tuple[type[BaseException], ...] = tuple(
    error for error in (getattr(aiohttp, "ClientConnectorDNSError", None),) if error is not None
)
