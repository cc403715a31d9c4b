"""Metric providers: where node values come from, and which node each series belongs to.

The Prometheus edge: instant queries through prometheus-api-client (synchronous, so the
refresher calls `fetch` from a worker thread), each series mapped to a node name. It
knows nothing of scoring or the engine; refresher.py drives it.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from extender.decisions.model import NodeInventory, NodeName
from extender.errors.causes import BadAnswer, HTTPStatusError, excerpt
from extender.policy.policies import MetricSettings
from extender.policy.sections import PrometheusSettings
from extender.policy.settings import Settings

log = logging.getLogger("decice.metrics")


class MetricsProvider(Protocol):
    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        """Blocking: node -> value for one metric. Raises on failure."""
        ...


class StaticProvider:
    """Values written in the policy file (demos, tests); like Krake's static provider."""

    def __init__(self, nodes: Mapping[str, Mapping[str, float]]) -> None:
        self._nodes = nodes

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        return {n: v[metric.name] for n, v in self._nodes.items() if metric.name in v}


@dataclass(frozen=True, slots=True)
class MappedSeries:
    values: dict[NodeName, float]
    dropped: list[str]
    """Why series were left out (no node label, non-numeric, NaN/Inf), for logs."""


def node_of(labels: Mapping[str, str], label: str, inventory: NodeInventory) -> NodeName | None:
    """The node a series belongs to: its label, or for an address, the node with that IP."""
    value = labels.get(label)
    if not isinstance(value, str) or not value:  # a broken answer: 7, ["a"], null, ""
        return None
    if label != "instance":
        return value
    host = value
    if host.startswith("["):  # [ipv6]:port
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    # An instance that is a node name (kube-prometheus jsonnet) maps to itself.
    return inventory.by_ip.get(host, host)


def map_series(result: Sequence[Any], label: str, inventory: NodeInventory) -> MappedSeries:
    """Prometheus instant-vector result -> node -> value. Duplicates keep the highest value
    (the conservative reading of load); NaN, +-Inf and non-numbers are dropped."""
    values: dict[NodeName, float] = {}
    dropped: list[str] = []
    for item in result:
        if not isinstance(item, dict):
            dropped.append(f"not a series: {item!r:.80}")
            continue
        labels = item.get("metric") or {}
        node = node_of(labels, label, inventory) if isinstance(labels, dict) else None
        if node is None:
            dropped.append(f"no {label!r} label: {labels!r:.120}")
            continue
        sample = item.get("value")
        try:
            value = float(sample[1]) if isinstance(sample, (list, tuple)) else math.nan
        except (TypeError, ValueError, IndexError):
            value = math.nan
        if not math.isfinite(value):
            dropped.append(f"{node}: value {sample!r:.40} is not a finite number")
            continue
        if node in values:
            dropped.append(f"{node}: duplicate series, keeping the highest value")
            value = max(value, values[node])
        values[node] = value
    return MappedSeries(values, dropped)


class PrometheusProvider:
    """PromQL instant queries through prometheus-api-client (headers, auth, TLS, timeout)."""

    def __init__(self, settings: PrometheusSettings, client: PrometheusConnect | None = None):
        self._settings = settings
        self._client = client or PrometheusConnect(
            url=settings.url,
            headers=dict(settings.headers),
            disable_ssl=settings.insecure_skip_verify,
            auth=_basic_auth(settings),
            timeout=settings.timeout,
        )
        if settings.ca_file and not settings.insecure_skip_verify:
            self._client._session.verify = settings.ca_file
        # The client retries 5xx and timeouts itself with back-off; we own back-off, so one
        # try per refresh. It mounts its retrying adapter on its own URL, the most specific
        # prefix, so that prefix is replaced too (else a slow server costs 4 timeouts).
        for prefix in ("http://", "https://", self._client.url):
            self._client._session.mount(prefix, _single_try_adapter())

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        result = self.query(metric.query)
        mapped = map_series(result, self._settings.node_label, inventory)
        if mapped.dropped:
            log.warning(
                "metric %s: %d series dropped, e.g. %s",
                metric.name,
                len(mapped.dropped),
                "; ".join(mapped.dropped[:3]),
            )
        return mapped.values

    def query(self, promql: str) -> list[Any]:
        """Blocking: one instant query, its `data.result` as Prometheus sent it (labels,
        `[timestamp, "value"]`). Raises with a cause for extender.errors.causes.describe."""
        headers = dict(self._settings.headers)
        if self._settings.bearer_token_file:  # re-read: projected tokens rotate
            token = Path(self._settings.bearer_token_file).read_text(encoding="utf-8").strip()
            headers["Authorization"] = f"Bearer {token}"
        self._client.headers = headers
        try:
            result = self._client.custom_query(
                promql,
                params={"timeout": f"{self._settings.timeout:g}s"},
                timeout=self._settings.timeout,
            )
        except PrometheusApiClientException as exc:
            raise status_error(exc) from exc
        except json.JSONDecodeError as exc:
            raise BadAnswer(f"Prometheus answered 200 but not JSON: {excerpt(exc.doc)}") from exc
        except (KeyError, TypeError) as exc:
            raise BadAnswer("Prometheus answered 200 without data.result") from exc
        series: list[Any] = result
        return series


_CLIENT_STATUS = re.compile(r"HTTP Status Code (\d+) \((b'.*'|b\".*\")\)\Z", re.DOTALL)


def status_error(exc: PrometheusApiClientException) -> Exception:
    """The client's non-200 error ("HTTP Status Code 503 (b'...')") with its status and
    body back apart, for extender.errors.causes to describe; unchanged when not in that form."""
    m = _CLIENT_STATUS.match(str(exc))
    if m is None:
        return exc
    try:
        body = ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError):
        body = b""
    return HTTPStatusError(int(m.group(1)), body if isinstance(body, bytes) else b"")


def _basic_auth(settings: PrometheusSettings) -> tuple[str, str] | None:
    if settings.basic_auth is None:
        return None
    password = Path(settings.basic_auth.password_file).read_text(encoding="utf-8").strip()
    return (settings.basic_auth.username, password)


def _single_try_adapter() -> Any:
    from requests.adapters import HTTPAdapter

    return HTTPAdapter(max_retries=0)


def provider_for(settings: Settings) -> MetricsProvider:
    if settings.provider == "static":
        return StaticProvider(settings.static_nodes)
    return PrometheusProvider(settings.prometheus)
