"""The policy's `prometheus:` section: any server of the Prometheus query API (Prometheus,
VictoriaMetrics, Thanos Query, Mimir, Cortex). Secrets come from files, never from the
policy: it is a ConfigMap."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict, StrictBool, StrictStr, field_validator, model_validator

from extender.policy.fields import HttpURL, Model, NonEmpty, Seconds

TENANT_HEADER = "X-Scope-OrgID"
"""The tenant header of Mimir, Cortex and Thanos' tenancy (and of VictoriaMetrics' vmauth)."""

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Headers that carry credentials: only from files (bearerTokenFile, headerFiles)."""

# An HTTP header name (an RFC 9110 token).
HeaderName = Annotated[str, Strict(), Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")]


class BasicAuth(Model):
    username: NonEmpty
    """User name sent with HTTP basic auth."""
    password_file: NonEmpty
    """File holding the password (re-read each refresh)."""


class PrometheusSettings(Model):
    url: HttpURL = "http://prometheus-operated.monitoring.svc:9090"
    """Base URL of the query API (Prometheus, VictoriaMetrics, Thanos Query, Mimir's
    /prometheus prefix...); PROMETHEUS_URL overrides it."""
    interval: Seconds = 15.0
    """Seconds between refreshes."""
    timeout: Seconds = 5.0
    """Per-query timeout in seconds."""
    max_backoff: Seconds = 120.0
    """Ceiling of the refresh back-off after consecutive errors."""
    node_label: NonEmpty = "node"
    """Label naming the node; `instance` addresses map to nodes by their InternalIP."""
    child_process_above: Annotated[int, Strict(), Field(ge=0)] | None = 2000
    """Decode a metric's answer in a child process once its last one held more than this
    many series (0: always; null: never), so a large answer never holds up requests; it
    costs memory (BENCHMARKS.md)."""
    headers: dict[HeaderName, StrictStr] = {}  # noqa: RUF012 (pydantic copies defaults)
    """Extra HTTP headers of every query; never credentials (those come from files)."""
    header_files: dict[HeaderName, StrictStr] = {}  # noqa: RUF012 (pydantic copies defaults)
    """Header -> file holding its value (a mounted Secret), re-read each refresh."""
    tenant: StrictStr | None = Field(default=None, min_length=1)
    """Sent as X-Scope-OrgID: the tenant on Mimir, Cortex or a multi-tenant Thanos
    ("a|b" queries several on Mimir). From a file instead: headerFiles."""
    dedup: StrictBool | None = None
    """Thanos Query's `dedup` parameter (merge replicas); unset: the server's default."""
    partial_response: StrictBool | None = None
    """Thanos Query's `partial_response` parameter; unset: the server's default. A partial
    answer is never taken whole: the metric keeps its last whole values until maxAge."""
    bearer_token_file: StrictStr | None = None
    """Sent as "Authorization: Bearer <token>", re-read each refresh (projected tokens rotate)."""
    basic_auth: BasicAuth | None = None
    """HTTP basic auth: {username, passwordFile}."""
    ca_file: StrictStr | None = Field(default=None, alias="caFile")
    """CA bundle for https."""
    insecure_skip_verify: StrictBool = False
    """Do not verify the server certificate (tests only)."""

    @field_validator("headers")
    @classmethod
    def _no_secrets(cls, headers: dict[str, str]) -> dict[str, str]:
        secret = sorted(h for h in headers if h.lower() in SECRET_HEADERS)
        if secret:
            raise ValueError(
                f"{', '.join(secret)} would put a credential in the policy in plain text: "
                "use bearerTokenFile, basicAuth.passwordFile or headerFiles (a mounted Secret)"
            )
        return headers

    @model_validator(mode="after")
    def _each_header_once(self) -> PrometheusSettings:
        named: dict[str, list[str]] = {}
        for where, names in (("headers", self.headers), ("headerFiles", self.header_files)):
            for name in names:
                named.setdefault(name.lower(), []).append(f"{where}.{name}")
        if self.tenant is not None:
            named.setdefault(TENANT_HEADER.lower(), []).append("tenant")
        if self.bearer_token_file is not None or self.basic_auth is not None:
            named.setdefault("authorization", []).append("bearerTokenFile/basicAuth")
        twice = [" and ".join(w) for w in named.values() if len(w) > 1]
        if twice:
            raise ValueError(f"one header set twice: {'; '.join(twice)}")
        if self.bearer_token_file is not None and self.basic_auth is not None:
            raise ValueError("bearerTokenFile and basicAuth both set Authorization: choose one")
        return self

    @property
    def query_parameters(self) -> dict[str, str]:
        """What every query adds to `query` and `timeout` (Thanos' switches when set)."""
        switches = (("dedup", self.dedup), ("partial_response", self.partial_response))
        return {name: str(on).lower() for name, on in switches if on is not None}
