"""Servers holding a cluster's past: a real Prometheus or VictoriaMetrics with backfilled
history and the stock recording rules recorded over it, on 127.0.0.1.

* Prometheus (`backfilled_prometheus`): the raw series (OpenMetrics, e.g.
  tests.harness.clusterhistory) become TSDB blocks with `promtool tsdb create-blocks-from
  openmetrics`; the server starts on them; `promtool tsdb create-blocks-from rules`
  evaluates the rule files against it over the history (every `eval_interval`, as the
  rules would have run), and the server restarts with those blocks too. Its retention is
  the caller's, its lookback the default 5 minutes (a range query's points fall between
  samples).
* VictoriaMetrics (`backfilled_victoria_metrics`): the raw series through its import API
  (`/api/v1/import/prometheus`, as tests.harness.vmharness.import_history, for series that
  begin and end at any time), then `vmalert -replay.timeFrom/-replay.timeTo`
  evaluates the rule files over the history and writes the results back.

Neither scrapes anything: the history is all they hold.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from tests.harness.loopback import wait_until
from tests.harness.promharness import PrometheusServer, backfill, prometheus_binary
from tests.harness.vmharness import (
    VictoriaMetricsServer,
    flush,
    prometheus_text,
    victoria_metrics_binary,
    vmalert_binary,
)

RETENTION_FLAG = "--storage.tsdb.retention.time="


class HistoryPrometheus(PrometheusServer):
    """A PrometheusServer with no targets, a lookback of 5 minutes and `retention`."""

    def __init__(self, workdir: Path, retention: str = "30d") -> None:
        super().__init__([], workdir=workdir, binary=prometheus_binary(), lookback_delta="5m")
        self.retention = retention

    def command(self) -> list[str]:
        return [
            f"{RETENTION_FLAG}{self.retention}" if part.startswith(RETENTION_FLAG) else part
            for part in super().command()
        ]


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def backfilled_prometheus(
    history: str,
    rule_files: list[Path],
    start: float,
    end: float,
    workdir: Path,
    *,
    retention: str = "30d",
    eval_interval: int = 30,
) -> HistoryPrometheus:
    """A started Prometheus holding `history` and the rules recorded over [start, end]."""
    workdir.mkdir(parents=True, exist_ok=True)
    backfill(prometheus_binary(), history, workdir)
    server = HistoryPrometheus(workdir, retention)
    server.start()
    if not rule_files:
        return server
    try:
        blocks = workdir / "rule-blocks"
        promtool = str(Path(server.binary).with_name("promtool"))
        command = [
            promtool, "tsdb", "create-blocks-from", "rules",
            f"--start={start:.0f}", f"--end={end:.0f}", f"--url={server.url}",
            f"--output-dir={blocks}", f"--eval-interval={eval_interval}s", "--quiet",
            *map(str, rule_files),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        server.stop()
        for block in blocks.iterdir():
            shutil.move(str(block), server.data_dir / block.name)
        server.start()
    except BaseException:
        server.close()
        raise
    return server


def _import(server: VictoriaMetricsServer, openmetrics: str, start: float, end: float) -> None:
    """Load `openmetrics` and wait until every series of it answers a query over the range."""
    text, _ = prometheus_text(openmetrics)
    request = urllib.request.Request(
        f"{server.url}/api/v1/import/prometheus", data=text.encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 204, f"import: HTTP {response.status}"
    series = len({line.rsplit(" ", 2)[0] for line in text.splitlines()})
    span = f"{math.ceil(end - start) + 60}s"
    query = f'count(last_over_time({{__name__!=""}}[{span}]))'

    def visible() -> bool:
        flush(server.url)
        result = server.query(query, at=end)
        return bool(result) and int(float(result[0]["value"][1])) == series

    wait_until(visible, 60, f"the {series} imported series answer queries")


def backfilled_victoria_metrics(
    history: str,
    rule_files: list[Path],
    start: float,
    end: float,
    workdir: Path,
    *,
    eval_interval: int = 30,
    recorded: str | None = None,
) -> VictoriaMetricsServer:
    """A started VictoriaMetrics holding `history` and the rules recorded over [start, end]
    by vmalert's replay mode; `recorded` is a series to wait for (the last rule's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = VictoriaMetricsServer(
        [], workdir=workdir, binary=victoria_metrics_binary(), lookback="5m"
    )
    server.start()
    try:
        _import(server, history, start, end)
        if not rule_files:
            return server
        command = [
            vmalert_binary(),
            *(f"-rule={f}" for f in rule_files),
            f"-datasource.url={server.url}",
            f"-remoteWrite.url={server.url}",
            f"-replay.timeFrom={_rfc3339(start)}",
            f"-replay.timeTo={_rfc3339(end)}",
            f"-evaluationInterval={eval_interval}s",
            "-replay.rulesDelay=0s",
            "-replay.disableProgressBar",
            "-remoteWrite.flushInterval=200ms",
            "-loggerLevel=WARN",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        if recorded is not None:

            def visible() -> bool:
                flush(server.url)
                return bool(server.query(f"count(last_over_time({recorded}[1h]))", at=end))

            wait_until(visible, 30, f"{recorded} is visible after vmalert's replay")
    except BaseException:
        server.close()
        raise
    return server
