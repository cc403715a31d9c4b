"""Metric providers and the background refresher that swaps snapshots into the engine.

The request path never waits on Prometheus: the refresher runs every query in a
worker thread on an interval (prometheus-api-client is synchronous), maps each series
to a node name, builds the next answer table off the event loop and installs it. On
errors it keeps the last good values, records the error, and backs off.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from prometheus_api_client import PrometheusConnect

from extender.config import MetricSettings, PrometheusSettings, Settings
from extender.engine import Engine
from extender.model import MetricSeries, NodeInfo, NodeInventory, NodeName, Snapshot
from extender.scoring import stale_metrics
from extender.table import build_table

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
        headers = dict(self._settings.headers)
        if self._settings.bearer_token_file:  # re-read: projected tokens rotate
            token = Path(self._settings.bearer_token_file).read_text(encoding="utf-8").strip()
            headers["Authorization"] = f"Bearer {token}"
        self._client.headers = headers
        result = self._client.custom_query(
            metric.query,
            params={"timeout": f"{self._settings.timeout:g}s"},
            timeout=self._settings.timeout,
        )
        mapped = map_series(result, self._settings.node_label, inventory)
        if mapped.dropped:
            log.warning(
                "metric %s: %d series dropped, e.g. %s",
                metric.name,
                len(mapped.dropped),
                "; ".join(mapped.dropped[:3]),
            )
        return mapped.values


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


def empty_snapshot(settings: Settings) -> Snapshot:
    return Snapshot(metrics={m.name: MetricSeries() for m in settings.metrics}, taken_at=0.0)


def next_snapshot(
    previous: Snapshot,
    results: Mapping[str, dict[NodeName, float] | BaseException],
    now: float,
) -> Snapshot:
    """Merge one refresh: new values where the query worked, old ones (with the error) where not."""
    metrics: dict[str, MetricSeries] = {}
    for name, result in results.items():
        old = previous.metrics.get(name, MetricSeries())
        if isinstance(result, BaseException):
            metrics[name] = replace(old, error=_describe(result))
        else:
            metrics[name] = MetricSeries(values=result, fetched_at=now, error=None)
    return Snapshot(metrics=metrics, taken_at=now, generation=previous.generation + 1)


_SECRET = re.compile(r"(?i)\b(bearer|basic)\s+[^\s'\",)]+")


def _describe(exc: BaseException) -> str:
    """One line for logs and /readyz: credentials a proxy echoes in its answer are redacted."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = _SECRET.sub(lambda m: f"{m.group(1)} <redacted>", text)
    return f"{type(exc).__name__}: {text}"[:300]


class RefreshListener(Protocol):
    def refreshed(self, snapshot: Snapshot, errors: Mapping[str, str], seconds: float) -> None: ...


class Refresher:
    """Runs the queries on an interval and installs each new snapshot into the engine."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        provider: MetricsProvider,
        list_nodes: Callable[[], list[NodeInfo]] | None = None,
        listener: RefreshListener | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._engine = engine
        self._provider = provider
        self._list_nodes = list_nodes
        self._listener = listener
        self._clock = clock
        self._inventory = NodeInventory()
        self._inventory_at = -math.inf
        self.attempts = 0
        self.failures = 0  # consecutive refreshes with at least one error

    @property
    def interval(self) -> float:
        return self._settings.prometheus.interval

    def delay(self) -> float:
        """The wait before the next refresh: the interval, doubled per consecutive failure."""
        if self.failures == 0:
            return self.interval
        backoff: float = self.interval * 2.0 ** min(self.failures, 16)
        return min(backoff, self._settings.prometheus.max_backoff)

    def _fetch_all(self) -> dict[str, dict[NodeName, float] | BaseException]:
        if self._list_nodes is not None:
            now = self._clock()
            if now - self._inventory_at >= self._settings.kubernetes.node_refresh:
                try:
                    nodes = self._list_nodes()
                    self._inventory = NodeInventory.from_nodes(nodes)
                    self._inventory_at = now
                except Exception as exc:  # keep the old inventory; metrics still refresh
                    log.warning("listing nodes failed: %s", _describe(exc))
        results: dict[str, dict[NodeName, float] | BaseException] = {}
        for m in self._settings.metrics:
            try:
                results[m.name] = self._provider.fetch(m, self._inventory)
            except Exception as exc:
                results[m.name] = exc
        return results

    async def refresh_once(self) -> dict[str, str]:
        """One refresh; returns metric -> error for the queries that failed."""
        started = time.perf_counter()
        self.attempts += 1
        results = await asyncio.to_thread(self._fetch_all)
        now = self._clock()
        snapshot = next_snapshot(self._engine.snapshot, results, now)
        stale = stale_metrics(self._settings, snapshot, now)
        herd = self._engine.herd()
        table = await asyncio.to_thread(build_table, self._settings, snapshot, stale, herd, now)
        self._engine.set_node_cores(self._inventory.cpu_cores)
        self._engine.install(snapshot, table, self._clock())
        errors = {n: _describe(r) for n, r in results.items() if isinstance(r, BaseException)}
        self.failures = self.failures + 1 if errors else 0
        for name, error in errors.items():
            log.warning("refresh of metric %s failed (keeping last values): %s", name, error)
        if self._listener is not None:
            self._listener.refreshed(snapshot, errors, time.perf_counter() - started)
        return errors

    async def run(self) -> None:
        """Refresh forever; never raises (a bug in one round must not stop the next)."""
        while True:
            try:
                await self.refresh_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                log.exception("refresh failed unexpectedly")
            await asyncio.sleep(self.delay())
