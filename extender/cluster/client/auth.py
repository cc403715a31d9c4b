"""Where the API server is and who we are to it: kubeconfig or in-cluster configuration
(the `kubernetes` package's loaders, exec plugins and token refresh hooks), TLS and proxy.
"""

from __future__ import annotations

import base64
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import kubernetes.client
import kubernetes.config
from kubernetes.config.config_exception import ConfigException

from extender.cluster.client.errors import KubeError

# The `kubernetes` package leaves these unannotated.
_new_client_from_config: Callable[..., kubernetes.client.ApiClient] = (
    kubernetes.config.new_client_from_config
)
_load_incluster_config: Callable[..., None] = kubernetes.config.load_incluster_config


def _from_file(path: str) -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration()  # not the package's default
    return _new_client_from_config(
        config_file=path, client_configuration=configuration, persist_config=False
    )


def load_api_client(kubeconfig: str | None) -> kubernetes.client.ApiClient:
    """A `kubernetes.client.ApiClient` for `kubeconfig`; without one, the pod's service
    account, else `$KUBECONFIG` / `~/.kube/config`. The package's process-wide default
    configuration is never touched."""
    try:
        if kubeconfig is not None:
            return _from_file(kubeconfig)
        configuration = kubernetes.client.Configuration()
        try:
            _load_incluster_config(client_configuration=configuration)
        except ConfigException as in_cluster:
            default = os.environ.get("KUBECONFIG") or "~/.kube/config"
            try:
                return _from_file(default)
            except ConfigException as from_file:
                raise KubeError(
                    f"not in a cluster ({in_cluster}) and no usable kubeconfig at "
                    f"{default} ({from_file})",
                    reason="ConfigError",
                ) from from_file
        return kubernetes.client.ApiClient(configuration)
    except KubeError:
        raise
    except Exception as exc:  # YAML, I/O, exec plugins: all a config problem here
        where = kubeconfig or "in-cluster config"
        raise KubeError(f"cannot load {where}: {exc}", reason="ConfigError") from exc


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to reach it, from a `kubernetes.client.Configuration`."""

    base: str  # the URL without a trailing slash (a path prefix included)
    where: str  # host:port, for messages
    tls: ssl.SSLContext | None
    options: dict[str, Any]  # aiohttp's per-request options: redirects, proxy, server name
    static: dict[str, str]  # headers of every request: basic auth, a plain proxy's headers


def endpoint_of(config: Any) -> Endpoint:
    """The endpoint of a `kubernetes.client.Configuration`; KubeError (ConfigError) for a
    URL that is not an API server's, bad TLS files or a SOCKS proxy."""
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
    static: dict[str, str] = {}
    proxy = proxy_for(config, base)
    if proxy is not None:
        options["proxy"] = proxy
        if config.proxy_headers:
            # aiohttp sends proxy_headers on a tunnel's CONNECT only: through a plain-HTTP
            # proxy they ride with each request.
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
    return Endpoint(base, f"{url.hostname}:{port}", tls, options, static)


def ssl_context(configuration: Any) -> ssl.SSLContext:
    """The TLS settings of a `kubernetes.client.Configuration` as an `ssl.SSLContext`."""
    cafile = configuration.ssl_ca_cert or None
    cadata = getattr(configuration, "ca_cert_data", None) or None
    context = ssl.create_default_context(cafile=cafile, cadata=cadata)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


def proxy_for(configuration: Any, host: str) -> str | None:
    """The proxy for `host` as the `kubernetes` package resolves it (`proxy-url`, else
    $HTTPS_PROXY / $HTTP_PROXY, unless `no_proxy` names the host)."""
    proxy = getattr(configuration, "proxy", None) or None
    if proxy is None:
        return None
    if str(proxy).lower().startswith("socks"):
        raise KubeError(f"SOCKS proxies are not supported: {proxy}", reason="ConfigError")
    no_proxy = getattr(configuration, "no_proxy", None) or ""
    if no_proxy:
        try:
            from kubernetes.client.rest import should_bypass_proxies
        except ImportError:  # an older `kubernetes`: no no_proxy support there either
            return str(proxy)
        if should_bypass_proxies(host, no_proxy=no_proxy):
            return None
    return str(proxy)


AUTH_TTL = 10.0
"""Seconds the auth headers are reused: the kubeconfig loader's refresh hook re-reads the
whole user entry, and tokens rotate in minutes; a 401 asks again at once."""


@dataclass(eq=False)
class AuthHeaders:
    """The headers a request authenticates with: `static` ones and the configuration's
    `auth_settings()` (its refresh hooks), asked at most every `ttl` seconds."""

    configuration: Any
    static: Mapping[str, str]
    ttl: float = AUTH_TTL
    clock: Callable[[], float] = time.monotonic
    _cached: dict[str, str] | None = field(default=None, init=False)
    _asked_at: float = field(default=0.0, init=False)

    def get(self) -> dict[str, str]:
        """A fresh copy, the caller may add to it."""
        now = self.clock()
        if self._cached is None or now - self._asked_at >= self.ttl:
            self._cached, self._asked_at = self._ask(), now
        return self._cached.copy()

    def expire(self) -> None:
        self._cached = None

    def _ask(self) -> dict[str, str]:
        headers = dict(self.static)
        for setting in self.configuration.auth_settings().values():
            value = setting.get("value")
            if value and setting.get("in") == "header":
                key = str(setting["key"])
                headers["Authorization" if key.lower() == "authorization" else key] = value
        return headers
