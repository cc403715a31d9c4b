"""Where the API server is and how to reach it, as a kubeconfig or the in-cluster service
account gives it: host, port and path, TLS, a proxy, basic auth."""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from extender.cluster.client.auth import proxy_for, ssl_context
from extender.cluster.client.errors import KubeError


@dataclass(frozen=True)
class Endpoint:
    base: str
    """The server's URL without a trailing slash."""
    host: str
    port: int
    prefix: str
    """The URL's path, prepended to every request's (a server behind a path)."""
    tls: ssl.SSLContext | None
    options: dict[str, Any]
    """aiohttp's per-request options: no redirects; the proxy and its headers; the TLS
    server name when the configuration names one."""
    static: dict[str, str]
    """Headers sent with every request: basic auth, a plain-HTTP proxy's headers."""

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def endpoint_of(config: Any) -> Endpoint:
    """The endpoint of a `kubernetes.client.Configuration`; KubeError (ConfigError) for a
    URL that is not an API server's or bad TLS files."""
    base = str(config.host or "").rstrip("/")
    url = urlsplit(base)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        port = 0
    if url.scheme not in ("http", "https") or not url.hostname or not port:
        raise KubeError(f"not an API server URL: {base!r}", reason="ConfigError")
    tls: ssl.SSLContext | None = None
    if url.scheme == "https":
        try:
            tls = ssl_context(config)
        except (OSError, ValueError) as exc:
            raise KubeError(f"bad TLS settings: {exc}", reason="ConfigError") from exc
    options: dict[str, Any] = {"allow_redirects": False}
    # Sent with each request through a plain-HTTP proxy (aiohttp sends its proxy_headers
    # only on the CONNECT of a tunnel).
    static: dict[str, str] = {}
    proxy = proxy_for(config, base)
    if proxy is not None:
        options["proxy"] = proxy
        if config.proxy_headers:
            if tls is not None:
                options["proxy_headers"] = dict(config.proxy_headers)
            else:
                static.update(config.proxy_headers)
    server_name = config.tls_server_name or (
        config.assert_hostname
        if isinstance(config.assert_hostname, str) and config.assert_hostname
        else None
    )
    if tls is not None and server_name:
        options["server_hostname"] = str(server_name)
    if config.username or config.password:
        pair = f"{config.username or ''}:{config.password or ''}".encode()
        static["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    return Endpoint(base, url.hostname, port, url.path.rstrip("/"), tls, options, static)
