"""Credentials never reach a log line, /readyz or an Error answer.

Prometheus proxies and API servers sometimes echo the request's Authorization header in
their error text; every message from an edge goes through `redact` before it is shown.
"""

from __future__ import annotations

import re

_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[^\s'\",)]+")


def redact(text: str) -> str:
    """`text` with the value after each `Bearer` / `Basic` replaced by `<redacted>`."""
    return _CREDENTIAL.sub(lambda m: f"{m.group(1)} <redacted>", text)


def describe(exc: BaseException) -> str:
    """One line for logs and /readyz: the exception's type and first line, redacted."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {redact(text)}"[:300]
