"""Credentials never reach a log line, /readyz or an Error answer: servers may echo the
Authorization header in error text, so every message from an edge goes through `redact`,
and URLs through `safe_url`."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[^\s'\",)]+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]*@")


def redact(text: str) -> str:
    """`text` without the credential after `Bearer` / `Basic` nor a URL's user:password@."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}<redacted>@", text)
    return _CREDENTIAL.sub(lambda m: f"{m.group(1)} <redacted>", text)


def safe_url(url: str) -> str:
    """`url` without userinfo, query or fragment (where tokens hide), for a log line."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparseable URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
