"""The background refresher: the queries run in a worker thread every `interval`, merged
into the next snapshot, its tables built off the loop: the request path never waits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, NodeInventory, NodeName, Snapshot
from extender.decisions.state import build_tables
from extender.decisions.usage import UsageTable
from extender.errors.backoff import Backoff
from extender.errors.causes import PartialAnswer, describe
from extender.errors.rounds import FIRST_BACKOFF_FACTOR, backoff
from extender.metrics.heap import FrozenHeap
from extender.metrics.providers import MetricsProvider, PrometheusProvider
from extender.metrics.usage import Querier, fetch_usage, next_usage, wanted
from extender.policy.settings import Settings

log = logging.getLogger("decice.refresher")

BUILD_SWITCH_INTERVAL: float | None = 0.0005
"""The GIL switch interval while tables are built in a thread, which a request arriving
meanwhile waits for (None: Python's 5 ms; BENCHMARKS.md, "Refreshes")."""

REPEAT_EVERY = 10  # refreshes between two logs of a failure whose cause is unchanged

Results = Mapping[str, dict[NodeName, float] | BaseException]
"""One refresh: metric -> node values, or the exception its query raised."""


def next_snapshot(previous: Snapshot, results: Results, now: float) -> Snapshot:
    """Merge one refresh: new values where the query worked, else old ones with the error
    (the pods' measured use stays: its own loop installs it)."""
    metrics: dict[str, MetricSeries] = {}
    for name, result in results.items():
        old = previous.metrics.get(name, MetricSeries())
        if isinstance(result, BaseException):
            metrics[name] = replace(old, error=describe(result))
        else:
            metrics[name] = MetricSeries(values=result, fetched_at=now, error=None)
    generation = previous.generation + 1
    return Snapshot(metrics=metrics, taken_at=now, generation=generation, usage=previous.usage)


@dataclass(slots=True)
class _Streak:
    failures: int
    since: float
    cause: str
    logged: int


class FailureLog:
    """A failure streak's first error at WARNING, then when its cause changes or every
    REPEAT_EVERY refreshes; INFO when the source answers again; metrics alike share a line."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._streaks: dict[str, _Streak] = {}

    def refreshed(self, metrics: list[str], errors: Mapping[str, str], now: float) -> None:
        lines: dict[tuple[int, str], list[str]] = {}  # (level, text) -> metrics
        for name in metrics:
            error, streak = errors.get(name), self._streaks.get(name)
            if error is None:
                if streak is not None:
                    del self._streaks[name]
                    text = (
                        f"{self._source} answered again after "
                        f"{_refreshes(streak.failures)} ({_duration(now - streak.since)})"
                    )
                    lines.setdefault((logging.INFO, text), []).append(name)
                continue
            if streak is None:
                self._streaks[name] = _Streak(1, now, error, 1)
                text = f"refresh failed (keeping the last values): {error}"
            else:
                streak.failures += 1
                if error != streak.cause:
                    text = f"refresh still failing ({_refreshes(streak.failures)}), now: {error}"
                elif streak.failures - streak.logged >= REPEAT_EVERY:
                    text = (
                        f"refresh still failing ({_refreshes(streak.failures)} in "
                        f"{_duration(now - streak.since)}): {error}"
                    )
                else:
                    log.debug("metric %s: refresh failed again: %s", name, error)
                    continue
                streak.cause, streak.logged = error, streak.failures
            lines.setdefault((logging.WARNING, text), []).append(name)
        for (level, text), names in sorted(lines.items(), key=lambda line: line[0][0]):
            log.log(level, "%s: %s", _metrics(names), text)


def _metrics(names: list[str]) -> str:
    return f"metric{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _refreshes(n: int) -> str:
    return f"{n} failed refresh{'es' if n != 1 else ''}"


def _duration(seconds: float) -> str:
    """41 s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _SwitchInterval:
    """sys.setswitchinterval for a block, entered on the event loop only; overlapping blocks
    (a refresh and a reload) restore the interval from before the first."""

    def __init__(self) -> None:
        self._depth = 0
        self._before = 0.0

    @contextlib.contextmanager
    def set_to(self, interval: float | None) -> Iterator[None]:
        if interval is None:
            yield
            return
        if self._depth == 0:
            self._before = sys.getswitchinterval()
            sys.setswitchinterval(interval)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                sys.setswitchinterval(self._before)


SWITCH_INTERVAL = _SwitchInterval()


@dataclass(eq=False)
class Refresher:
    """Runs the queries on an interval and installs each new snapshot into the engine."""

    settings: Settings
    engine: Engine
    provider: MetricsProvider
    inventory: Callable[[], NodeInventory] | None = None
    refreshed: Callable[[Snapshot, Mapping[str, str], float], object] | None = None
    clock: Callable[[], float] = time.time
    installed: Callable[[Snapshot], None] | None = None
    heap: FrozenHeap | None = None
    failures: int = field(default=0, init=False)  # in a row (a partial answer is none)
    rng: random.Random = field(default_factory=random.Random, init=False)  # tests seed it

    def __post_init__(self) -> None:
        self._usage_failures = 0
        provider = self.settings.provider
        source = "Prometheus" if provider == "prometheus" else f"{provider} provider"
        self.failure_log = FailureLog(source)
        self.usage_log = FailureLog(source)

    @property
    def interval(self) -> float:
        return self.settings.prometheus.interval

    def delay(self) -> float:
        """The interval; after failures, drawn (errors.backoff) up to a ceiling doubling from
        two intervals to `maxBackoff`, so replicas do not ask in lockstep."""
        if self.failures == 0:
            return self.interval
        cap = max(self.settings.prometheus.max_backoff, self.interval)
        first = min(FIRST_BACKOFF_FACTOR * self.interval, cap)
        policy = Backoff(base=first, cap=cap, floor=self.interval, rng=self.rng)
        return policy.wait(self.failures)

    def _fetch_all(self, settings: Settings, inventory: NodeInventory) -> Results:
        results: dict[str, dict[NodeName, float] | BaseException] = {}
        for m in settings.fetched_metrics:
            try:
                results[m.name] = self.provider.fetch(m, inventory)
            except Exception as exc:
                results[m.name] = exc
        return results

    async def refresh_usage_once(self) -> str | None:
        """One fetch of the pods' measured use, installed at once; its error, or None (its
        own loop: a slow answer must delay no metric refresh)."""
        settings = self.engine.settings
        guard = settings.herd_guard
        if not isinstance(self.provider, Querier) or not wanted(guard, settings.herd_guarded):
            return None
        try:
            fetched: UsageTable | Exception = await asyncio.to_thread(
                fetch_usage, self.provider, guard, self.clock()
            )
        except Exception as exc:
            fetched = exc
        now = self.clock()
        usage = next_usage(self.engine.snapshot.usage, fetched)
        self.engine.install_usage(usage, now)
        if self.heap is not None:
            self.heap.installed()
        what = "pods' measured use (herd guard)"
        error = describe(fetched) if isinstance(fetched, Exception) else None
        self.usage_log.refreshed([what], {what: error} if error else {}, now)
        self._usage_failures = self._usage_failures + 1 if error else 0
        return error

    def usage_delay(self) -> float:
        """herdGuard.usageInterval, drawn longer after failures (errors.rounds.backoff)."""
        interval = self.engine.settings.herd_guard.usage_interval
        return backoff(interval, self._usage_failures, self.rng)

    async def refresh_once(self, settings: Settings | None = None) -> dict[str, str]:
        """One refresh; metric -> error. `settings`: a reloaded policy, in force with its
        first snapshot; a refresh overtaken by a reload is dropped (no old policies back)."""
        started = time.perf_counter()
        in_force = self.engine.settings
        settings = settings or in_force
        # The node cache (nodes.py) changes on the loop: read it here, not in the thread.
        inventory = (self.inventory or NodeInventory)()
        results = await asyncio.to_thread(self._fetch_all, settings, inventory)
        now = self.clock()
        snapshot = next_snapshot(self.engine.snapshot, results, now)
        herd = self.engine.guard.projected(snapshot)
        sizes = self.engine.sizes
        with SWITCH_INTERVAL.set_to(BUILD_SWITCH_INTERVAL):
            tables = await asyncio.to_thread(build_tables, settings, snapshot, herd, now, sizes)
        if self.engine.settings is not in_force:
            log.info("refresh dropped: the policies were reloaded while it ran")
            return {}
        self.engine.set_node_cores(inventory.cpu_cores)
        self.engine.install(snapshot, tables, self.clock(), settings)
        if self.heap is not None:
            self.heap.installed()
        if self.installed is not None:
            self.installed(snapshot)
        errors = {n: describe(r) for n, r in results.items() if isinstance(r, BaseException)}
        # A partial answer is no sign of a struggling server: no back-off.
        struggling = any(
            isinstance(r, BaseException) and not isinstance(r, PartialAnswer)
            for r in results.values()
        )
        self.failures = self.failures + 1 if struggling else 0
        self.failure_log.refreshed(list(results), errors, now)
        if self.refreshed is not None:
            self.refreshed(snapshot, errors, time.perf_counter() - started)
        return errors

    async def refresh_guarded(self) -> None:
        """One refresh that never raises: a bug in one round must not stop the next."""
        try:
            await self.refresh_once()
        except Exception:  # not CancelledError, a BaseException
            self.failures += 1
            log.exception("refresh failed unexpectedly")

    async def run(self) -> None:
        """Refresh forever (the first was done before serving); the measured use beside."""
        usage = asyncio.create_task(self._run_usage(), name="usage")
        try:
            while True:
                await asyncio.sleep(self.delay())
                await self.refresh_guarded()
        finally:
            usage.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await usage
            if isinstance(self.provider, PrometheusProvider):  # its fetch subprocess
                self.provider.close()

    async def _run_usage(self) -> None:
        while True:
            try:
                await self.refresh_usage_once()
            except Exception:
                self._usage_failures += 1
                log.exception("usage fetch failed unexpectedly")
            await asyncio.sleep(self.usage_delay())
