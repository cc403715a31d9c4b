"""Where the API server is and who we are to it: kubeconfig or in-cluster configuration
(the `kubernetes` package's loaders, exec plugins and token refresh hooks), TLS and proxy.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import kubernetes.client
import kubernetes.config
from kubernetes.config.config_exception import ConfigException

from extender.cluster.client.errors import KubeError

# The `kubernetes` package leaves these unannotated.
_new_client_from_config: Callable[..., kubernetes.client.ApiClient] = (
    kubernetes.config.new_client_from_config
)
_load_incluster_config: Callable[..., None] = kubernetes.config.load_incluster_config


# --- client setup ---------------------------------------------------------------------


def _fresh_configuration() -> kubernetes.client.Configuration:
    configuration = kubernetes.client.Configuration()
    # KubeClient retries itself (bounded, and aware that a bind is not idempotent).
    configuration.retries = False
    return configuration


def load_api_client(kubeconfig: str | None) -> kubernetes.client.ApiClient:
    """A `kubernetes.client.ApiClient` for `kubeconfig`, or in-cluster, or the default file.

    With a path, that kubeconfig is loaded. Without one, the pod's service account is
    tried first, then `$KUBECONFIG` / `~/.kube/config`. The process-wide default
    configuration of the `kubernetes` package is never touched. `KubeClient` takes its
    `configuration`.
    """
    try:
        if kubeconfig is not None:
            return _new_client_from_config(
                config_file=kubeconfig,
                client_configuration=_fresh_configuration(),
                persist_config=False,
            )
        configuration = _fresh_configuration()
        try:
            _load_incluster_config(client_configuration=configuration)
        except ConfigException as in_cluster:
            default = os.environ.get("KUBECONFIG") or "~/.kube/config"
            try:
                return _new_client_from_config(
                    config_file=default,
                    client_configuration=_fresh_configuration(),
                    persist_config=False,
                )
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


# --- auth headers ----------------------------------------------------------------------

#: Seconds the auth headers are reused before the configuration's refresh hooks are asked
#: again. The kubeconfig loader's hook re-reads the whole user entry and re-sets the host,
#: which parses the proxy environment (half of a bind's CPU, measured against a real API
#: server: BENCHMARKS.md, "Cost to the scheduler"). Tokens rotate in minutes to hours (the
#: in-cluster loader re-reads its file once a minute), so seconds of reuse change nothing;
#: a 401 asks again at once.
AUTH_TTL = 10.0


class AuthHeaders:
    """The headers a request authenticates with: `static` ones (basic auth, proxy) and
    what the configuration's `auth_settings()` (and so its refresh hooks) give, asked at
    most every `ttl` seconds, and again after `expire()` (a 401)."""

    def __init__(
        self,
        configuration: Any,
        static: Mapping[str, str],
        ttl: float = AUTH_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._configuration = configuration
        self._static = dict(static)
        self._ttl = ttl
        self._clock = clock
        self._cached: dict[str, str] | None = None
        self._asked_at = 0.0

    def get(self) -> dict[str, str]:
        """A fresh copy, the caller may add to it."""
        now = self._clock()
        if self._cached is None or now - self._asked_at >= self._ttl:
            self._cached, self._asked_at = self._ask(), now
        return self._cached.copy()

    def expire(self) -> None:
        self._cached = None

    def _ask(self) -> dict[str, str]:
        headers = dict(self._static)
        for setting in self._configuration.auth_settings().values():
            value = setting.get("value")
            if value and setting.get("in") == "header":
                key = str(setting["key"])
                headers["Authorization" if key.lower() == "authorization" else key] = value
        return headers
