"""The doctor's backend checks, pure: which server answers the query API (its buildinfo:
Mimir names itself, Thanos answers a 0.x version, Prometheus 2.x/3.x, VictoriaMetrics marks
every answer with X-Server-Hostname, Cortex answers 404), and whether our tenant suits it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.doctor.rows import Row
from extender.errors.causes import HTTPStatusError, describe
from extender.policy.backend import TENANT_HEADER, PrometheusSettings

BuildInfo = tuple[int, Any, Mapping[str, str]]
"""GET /api/v1/status/buildinfo: status, JSON body (None when not JSON), headers."""
AskBuildInfo = Callable[[], BuildInfo]


@dataclass(frozen=True, slots=True)
class Backend:
    name: str
    """Prometheus, Thanos Query, Grafana Mimir, VictoriaMetrics, or what it calls itself."""
    version: str | None = None
    known: bool = True
    """False when the build info did not say (the name is a guess)."""

    @property
    def multi_tenant(self) -> bool:
        return self.name in ("Grafana Mimir", "Cortex")

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


def identify(answer: BuildInfo) -> Backend:
    status, body, headers = answer
    data = body.get("data") if isinstance(body, dict) else None
    info = data if isinstance(data, dict) else {}
    version = info.get("version") if isinstance(info.get("version"), str) else None
    if any(k.lower() == "x-server-hostname" for k in headers):
        return Backend("VictoriaMetrics", version or None)
    if status != 200:
        return Backend("unknown (no build info: Cortex, or a proxy in front?)", None, known=False)
    application = info.get("application")
    if isinstance(application, str) and application:
        return Backend(application, version)
    if not version:
        return Backend("VictoriaMetrics (build info without a version)", None, known=False)
    if version.startswith("0."):
        return Backend("Thanos Query", version)
    return Backend("Prometheus", version)


def backend_row(answer: BuildInfo | BaseException) -> Row:
    if isinstance(answer, BaseException):
        return Row("backend", "warn", f"build info not read: {describe(answer)}")
    backend = identify(answer)
    return Row("backend", "ok" if backend.known else "warn", str(backend))


def tenant_of(prometheus: PrometheusSettings) -> str | None:
    """Where our X-Scope-OrgID comes from (the value only when written in the policy)."""
    if prometheus.tenant is not None:
        return prometheus.tenant
    for where in (prometheus.headers, prometheus.header_files):
        for name, value in where.items():
            if name.lower() == TENANT_HEADER.lower():
                return value if where is prometheus.headers else f"from {value}"
    return None


def tenant_row(
    prometheus: PrometheusSettings,
    backend: Backend | None,
    reach_error: BaseException | None,
) -> Row | None:
    """FAIL when the server refused us for want of a tenant; a warning when a
    multi-tenant server gets none, or a single-tenant one gets one it ignores."""
    tenant = tenant_of(prometheus)
    if (
        isinstance(reach_error, HTTPStatusError)
        and reach_error.status in (400, 401)
        and b"org" in reach_error.body.lower()  # Mimir and Cortex: "no org id"
    ):
        return Row(
            "tenant",
            "FAIL",
            f"the server wants a tenant ({describe(reach_error)}): set prometheus.tenant, "
            f"or headerFiles {TENANT_HEADER} from a Secret",
        )
    if backend is None:
        return None if tenant is None else Row("tenant", "ok", f"{TENANT_HEADER}: {tenant}")
    if tenant is None:
        if backend.multi_tenant:
            return Row(
                "tenant",
                "warn",
                f"none sent: {backend.name} answers without one only with multi-tenancy off "
                f"(tenant 'anonymous'); set prometheus.tenant",
            )
        return None
    if backend.known and not backend.multi_tenant and backend.name != "Thanos Query":
        return Row(
            "tenant",
            "warn",
            f"{TENANT_HEADER}: {tenant} is sent but {backend.name} has no tenants; a proxy "
            "in front may read it",
        )
    return Row("tenant", "ok", f"{TENANT_HEADER}: {tenant}")
