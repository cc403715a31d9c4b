"""The background refresher: first refresh, the loop, back-off and the failure count.

The request path never waits on Prometheus: every `interval` the refresher runs the
provider's queries in a worker thread, merges them into the next immutable snapshot,
builds its answer table off the event loop and installs both into the engine. A query
that fails keeps its last good values with the error beside them; consecutive failures
double the wait up to `maxBackoff`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from extender.config import Settings
from extender.engine import Engine
from extender.metrics import MetricsProvider
from extender.model import MetricSeries, NodeInventory, NodeName, Snapshot
from extender.redaction import describe
from extender.scoring import stale_metrics
from extender.table import build_table

log = logging.getLogger("decice.refresher")

Results = Mapping[str, dict[NodeName, float] | BaseException]
"""One refresh: metric -> node values, or the exception its query raised."""


def next_snapshot(previous: Snapshot, results: Results, now: float) -> Snapshot:
    """Merge one refresh: new values where the query worked, old ones (with the error) where not."""
    metrics: dict[str, MetricSeries] = {}
    for name, result in results.items():
        old = previous.metrics.get(name, MetricSeries())
        if isinstance(result, BaseException):
            metrics[name] = replace(old, error=describe(result))
        else:
            metrics[name] = MetricSeries(values=result, fetched_at=now, error=None)
    return Snapshot(metrics=metrics, taken_at=now, generation=previous.generation + 1)


class RefreshListener(Protocol):
    def refreshed(self, snapshot: Snapshot, errors: Mapping[str, str], seconds: float) -> None: ...


class Refresher:
    """Runs the queries on an interval and installs each new snapshot into the engine."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        provider: MetricsProvider,
        inventory: Callable[[], NodeInventory] | None = None,
        listener: RefreshListener | None = None,
        clock: Callable[[], float] = time.time,
        installed: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self._settings = settings
        self._engine = engine
        self._provider = provider
        self._inventory = inventory or NodeInventory
        self._listener = listener
        self._clock = clock
        self._installed = installed
        self._failures = 0

    @property
    def interval(self) -> float:
        return self._settings.prometheus.interval

    @property
    def failures(self) -> int:
        """Consecutive refreshes with at least one error (or an unexpected failure)."""
        return self._failures

    def delay(self) -> float:
        """The wait before the next refresh: the interval, doubled per consecutive failure."""
        if self._failures == 0:
            return self.interval
        backoff: float = self.interval * 2.0 ** min(self._failures, 16)
        return min(backoff, self._settings.prometheus.max_backoff)

    def _fetch_all(
        self, inventory: NodeInventory
    ) -> dict[str, dict[NodeName, float] | BaseException]:
        results: dict[str, dict[NodeName, float] | BaseException] = {}
        for m in self._settings.metrics:
            try:
                results[m.name] = self._provider.fetch(m, inventory)
            except Exception as exc:
                results[m.name] = exc
        return results

    async def refresh_once(self) -> dict[str, str]:
        """One refresh; returns metric -> error for the queries that failed."""
        started = time.perf_counter()
        # The node cache (nodes.py) changes on the loop: read it here, not in the thread.
        inventory = self._inventory()
        results = await asyncio.to_thread(self._fetch_all, inventory)
        now = self._clock()
        snapshot = next_snapshot(self._engine.snapshot, results, now)
        stale = stale_metrics(self._settings, snapshot, now)
        herd = self._engine.herd()
        table = await asyncio.to_thread(build_table, self._settings, snapshot, stale, herd, now)
        self._engine.set_node_cores(inventory.cpu_cores)
        self._engine.install(snapshot, table, self._clock())
        if self._installed is not None:
            self._installed(snapshot)
        errors = {n: describe(r) for n, r in results.items() if isinstance(r, BaseException)}
        self._failures = self._failures + 1 if errors else 0
        for name, error in errors.items():
            log.warning("refresh of metric %s failed (keeping last values): %s", name, error)
        if self._listener is not None:
            self._listener.refreshed(snapshot, errors, time.perf_counter() - started)
        return errors

    async def refresh_guarded(self) -> None:
        """One refresh that never raises: a bug in one round must not stop the next."""
        try:
            await self.refresh_once()
        except asyncio.CancelledError:
            raise
        except Exception:
            self._failures += 1
            log.exception("refresh failed unexpectedly")

    async def run(self) -> None:
        """After the first refresh (done before serving): refresh forever, backing off."""
        while True:
            await asyncio.sleep(self.delay())
            await self.refresh_guarded()
