"""Metric providers: where node values come from, and which node each series belongs to
(prometheus-api-client, synchronous: the refresher fetches from a worker thread).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import requests
from prometheus_api_client import PrometheusConnect
from requests.adapters import HTTPAdapter

from extender.decisions.model import NodeInventory, NodeName
from extender.errors.causes import BadAnswer, HTTPStatusError, PartialAnswer, describe, excerpt
from extender.metrics.fetch_subprocess import Fetched, FetchSubprocess, in_subprocess
from extender.metrics.usage import sample_value
from extender.policy.backend import TENANT_HEADER, PrometheusSettings
from extender.policy.policies import MetricSettings
from extender.policy.settings import Settings

log = logging.getLogger("decice.metrics")


class MetricsProvider(Protocol):
    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        """Blocking: node -> value for one metric. Raises on failure."""
        ...


@dataclass(frozen=True)
class StaticProvider:
    """Values written in the policy file (demos, tests); like Krake's static provider."""

    nodes: Mapping[str, Mapping[str, float]]

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        return {n: v[metric.name] for n, v in self.nodes.items() if metric.name in v}


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


def map_series(result: Sequence[Any], label: str, inventory: NodeInventory) -> Fetched:
    """Prometheus instant-vector result -> node -> value, and why series were dropped.
    Duplicates keep the highest value (the conservative reading of load); NaN, +-Inf and
    non-numbers are dropped."""
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
        value = sample_value(item)
        if not math.isfinite(value):
            dropped.append(f"{node}: value {item.get('value')!r:.40} is not a finite number")
            continue
        if node in values:
            dropped.append(f"{node}: duplicate series, keeping the highest value")
            value = max(value, values[node])
        values[node] = value
    return Fetched(values, dropped, len(result))


class PrometheusProvider:
    """PromQL instant queries on any server of the Prometheus query API, through
    `PrometheusConnect` with our own requests session. `use_subprocess`: big answers go to
    a subprocess as prometheus.childProcessAbove says."""

    def __init__(self, settings: PrometheusSettings, use_subprocess: bool = True) -> None:
        self._settings = settings
        self._series: dict[str, int] = {}  # metric -> series in its last answer
        self.fetch_subprocess = (
            FetchSubprocess(settings, fetch_in_subprocess)
            if use_subprocess and settings.child_process_above is not None
            else None
        )
        session = requests.Session()
        session.verify = False if settings.insecure_skip_verify else (settings.ca_file or True)
        self._session = session
        self._client = PrometheusConnect(
            url=settings.url,
            headers=dict(settings.headers),
            auth=_basic_auth(settings),
            timeout=settings.timeout,
            session=session,
        )
        # The client mounts an adapter that retries on its URL; we own back-off, so one try.
        for prefix in ("http://", "https://", self._client.url):
            session.mount(prefix, HTTPAdapter(max_retries=0))

    def fetch(self, metric: MetricSettings, inventory: NodeInventory) -> dict[NodeName, float]:
        last = self._series.get(metric.name)
        sub = self.fetch_subprocess
        if sub is not None and in_subprocess(last, self._settings.child_process_above):
            fetched = sub.fetch(metric.query, inventory)
        else:
            fetched = map_series(self.query(metric.query), self._settings.node_label, inventory)
        self._series[metric.name] = fetched.series
        if dropped := fetched.dropped:
            shown = "; ".join(dropped[:3])
            log.warning("metric %s: %d series dropped, e.g. %s", metric.name, len(dropped), shown)
        return fetched.values

    def close(self) -> None:
        if self.fetch_subprocess is not None:
            self.fetch_subprocess.close()

    def query(self, promql: str, timeout: float | None = None) -> list[Any]:
        """Blocking: one instant query's `data.result`; raises for errors.causes.describe
        (PartialAnswer carries what came). `timeout`: the server's and ours."""
        seconds = self._settings.timeout if timeout is None else timeout
        params = {
            "query": promql,
            "timeout": f"{seconds:g}s",
            **self._settings.query_parameters,
        }
        payload = self._get("/api/v1/query", params, seconds)
        series = read_result(payload)
        notes = [w for w in _warnings(payload) if isinstance(w, str)]
        if notes:  # PromQL's own annotations ("PromQL info: ..."): the data is whole
            log.info("query annotations: %s", "; ".join(notes)[:300])
        return series

    def build_info(self) -> tuple[int, Any, Mapping[str, str]]:
        """Blocking: /api/v1/status/buildinfo's status, JSON (or None) and headers (doctor)."""
        response = self._request("/api/v1/status/buildinfo", {})
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            body = None
        return response.status_code, body, dict(response.headers)

    def _get(self, path: str, params: Mapping[str, str], timeout: float | None = None) -> Any:
        # Not the client's custom_query: we must read `warnings` and `isPartial` too.
        response = self._request(path, params, timeout)
        if response.status_code != 200:
            raise HTTPStatusError(response.status_code, response.content)
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            text = response.content.decode("utf-8", "replace")
            raise BadAnswer(f"Prometheus answered 200 but not JSON: {excerpt(text)}") from exc

    def _request(
        self, path: str, params: Mapping[str, str], timeout: float | None = None, root: str = ""
    ) -> Any:
        session = self._session
        return session.get(
            f"{root or self._client.url}{path}",
            params=params,
            headers=self.headers(),
            auth=self._client.auth,
            # Passed: requests would let REQUESTS_CA_BUNDLE override caFile otherwise.
            verify=session.verify,
            cert=session.cert,
            timeout=self._settings.timeout if timeout is None else timeout,
        )

    def headers(self) -> dict[str, str]:
        """The headers of the next query; files are re-read now (tokens rotate)."""
        settings = self._settings
        headers = dict(settings.headers)
        if settings.tenant is not None:
            headers[TENANT_HEADER] = settings.tenant
        for name, path in settings.header_files.items():
            headers[name] = _read_secret(path, f"headerFiles.{name}")
        if settings.bearer_token_file:
            token = _read_secret(settings.bearer_token_file, "bearerTokenFile")
            headers["Authorization"] = f"Bearer {token}"
        return headers


def read_result(payload: Any) -> list[Any]:
    """An answer's `data.result`; BadAnswer without one, PartialAnswer when partial."""
    try:
        result = payload["data"]["result"]
    except (KeyError, TypeError) as exc:
        raise BadAnswer("Prometheus answered 200 without data.result") from exc
    if not isinstance(result, list):
        raise BadAnswer(f"Prometheus answered 200 with data.result {excerpt(repr(result))}")
    partial = partial_cause(payload)
    if partial is not None:
        raise PartialAnswer(f"partial answer ({len(result)} series): {partial}", result)
    return result


def partial_cause(payload: Any) -> str | None:
    """Why an answer is partial: VictoriaMetrics' `isPartial`, Thanos' and Mimir's
    `warnings` (not PromQL's own annotations); else None."""
    if not isinstance(payload, dict):
        return None
    if payload.get("isPartial") is True:
        return "isPartial: some storage nodes did not answer"
    stores = [w for w in _warnings(payload) if not (isinstance(w, str) and w.startswith("PromQL"))]
    return "; ".join(str(w) for w in stores) if stores else None


def _warnings(payload: Mapping[str, Any]) -> list[Any]:
    warnings = payload.get("warnings")
    return warnings if isinstance(warnings, list) else []


def _read_secret(path: str, key: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BadAnswer(f"prometheus.{key}: cannot read {path}: {exc.strerror}") from exc


def _basic_auth(settings: PrometheusSettings) -> tuple[str, str] | None:
    if settings.basic_auth is None:
        return None
    password = _read_secret(settings.basic_auth.password_file, "basicAuth.passwordFile")
    return (settings.basic_auth.username, password)


_in_subprocess: tuple[PrometheusSettings, PrometheusProvider] | None = None  # the child's


def fetch_in_subprocess(
    settings: PrometheusSettings, query: str, inventory: NodeInventory
) -> Fetched:
    """In the subprocess: one query through the same code as in the service."""
    global _in_subprocess
    if _in_subprocess is None or _in_subprocess[0] != settings:
        _in_subprocess = (settings, PrometheusProvider(settings, use_subprocess=False))
    try:
        result = _in_subprocess[1].query(query)
    except Exception as exc:
        return Fetched(error=describe(exc), partial=isinstance(exc, PartialAnswer))
    return map_series(result, settings.node_label, inventory)


def provider_for(settings: Settings) -> MetricsProvider:
    if settings.provider == "static":
        return StaticProvider(settings.static_nodes)
    return PrometheusProvider(settings.prometheus)
