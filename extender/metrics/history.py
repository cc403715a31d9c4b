"""Range queries over a server's history, the replay's only I/O, in bounded chunks
(halved when the server refuses one as too large); a transient failure is retried twice."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from extender.errors.backoff import Backoff
from extender.errors.causes import HTTPStatusError
from extender.metrics.providers import PrometheusProvider, read_result
from extender.policy.backend import PrometheusSettings

MAX_POINTS = 10_000  # points per series in one answer (Prometheus' limit is 11,000)
RETRIES = 2
RETRY_BACKOFF = Backoff(base=2.0, cap=4.0, floor=0.5)  # jittered: no lockstep
_TOO_LARGE = re.compile(
    r"too many samples|maxSamplesPerQuery|exceeded maximum resolution|maxPointsPerTimeseries"
    r"|maxSeries|too many points",
    re.IGNORECASE,
)
_TRANSIENT = ("Timeout", "ConnectionError", "ChunkedEncodingError")
_RETENTION = re.compile(r"-retentionPeriod=\"?([^\"\s]+)")
VM_DEFAULT_RETENTION = "1"  # VictoriaMetrics' -retentionPeriod when not set: one month


@dataclass(frozen=True, slots=True)
class Chunk:
    result: list[Any]  # one range query's `data.result` (a matrix)
    start: float
    end: float
    done: float  # the share of the whole range answered so far, 0..1


class HistoryReader(PrometheusProvider):
    """Range queries on any server of the Prometheus query API (the policy's `prometheus:`)."""

    def __init__(
        self,
        settings: PrometheusSettings,
        max_samples: int = 500_000,
        sleep: Callable[[float], None] = time.sleep,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        super().__init__(settings)
        self.max_samples = max_samples
        self._sleep = sleep
        self._backoff = backoff

    def query_range(
        self, promql: str, start: float, end: float, step: float, series: int = 1
    ) -> Iterator[Chunk]:
        """The matrix of `promql` from `start` to `end` by `step`, in chunks of at most
        `max_samples` samples for about `series` series."""
        points = max(1, min(MAX_POINTS, self.max_samples // max(1, series)))
        total = max(1, round((end - start) / step) + 1)
        first, asked = start, 0
        while first <= end + 1e-6:
            last = min(end, first + (points - 1) * step)
            try:
                result = self._range_once(promql, first, last, step)
            except HTTPStatusError as exc:
                if points > 1 and _TOO_LARGE.search(str(exc)):
                    points = max(1, points // 2)  # the server's limit is below ours: halve
                    continue
                raise
            asked += round((last - first) / step) + 1
            yield Chunk(result, first, last, min(1.0, asked / total))
            first = last + step

    def _range_once(self, promql: str, start: float, end: float, step: float) -> list[Any]:
        params = {
            "query": promql,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:g}s",
            "timeout": f"{self._settings.timeout:g}s",
            **self._settings.query_parameters,
        }
        for failures in range(1, RETRIES + 2):
            last = failures > RETRIES
            try:
                payload = self._get("/api/v1/query_range", params)
                break
            except HTTPStatusError as exc:
                if exc.status < 500 or last:
                    raise
            except Exception as exc:
                if last or not any(n in type(exc).__name__ for n in _TRANSIENT):
                    raise
            self._sleep(self._backoff.wait(failures))
        return read_result(payload)

    def probe(self) -> None:
        """One instant query the server must answer: reachable and authorised, or raise."""
        self.query("vector(1)")

    def retention(self) -> str | None:
        """How long the server keeps data (Prometheus' runtimeinfo `storageRetention`;
        VictoriaMetrics' -retentionPeriod from /flags, months unless it has a unit), or None."""
        try:
            response = self._request("/api/v1/status/runtimeinfo", {})
            if response.status_code == 200:
                retention = orjson.loads(response.content)["data"]["storageRetention"]
                return str(retention) if retention else None
            return self._flags_retention()
        except Exception:  # best effort: the caller says "retention unknown"
            return None

    def _flags_retention(self) -> str | None:
        base = self._client.url
        for root in dict.fromkeys((base, base.removesuffix("/prometheus"))):
            response = self._request("/flags", {}, root=root)
            text = response.content.decode("utf-8", "replace")
            if response.status_code != 200 or not text.startswith("-"):
                continue
            match = _RETENTION.search(text)
            value = match.group(1) if match is not None else VM_DEFAULT_RETENTION
            return f"{value}M" if value.isdigit() else value
        return None
