"""Test harness: a real VictoriaMetrics (single node) in place of Prometheus.

``VictoriaMetricsServer`` has the surface of ``promharness.PrometheusServer`` (both are
``promharness.MetricsServer``: url, start/stop/restart/close, context manager, ``query``,
``wait_for``, ``wait_for_first_scrape``, ``log_tail``) and runs ``victoria-metrics`` on
127.0.0.1, scraping the same exporters with the same scrape config (1 s, honor_labels)
through its own scraper (``-promscrape.config``), on a fresh ``-storageDataPath``.

* Recording rules (``rule_files``): a real ``vmalert`` beside it evaluates them each
  second (``VMAlert``), querying the server and writing the results back to it, as a
  VictoriaMetrics install runs kube-prometheus-stack's rules. It starts and stops with
  the server.
* History (``history``): OpenMetrics text, as ``promharness.backfill`` takes for
  promtool, loaded through VictoriaMetrics' import API (``import_history``) on the first
  start, before vmalert, so ``[5m]`` rates are whole from the first evaluation.

A missing binary fails the test with a message naming scripts/setup (never a skip):
``victoria_metrics_binary()``, ``vmalert_binary()``.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.parse
import urllib.request
from pathlib import Path

from tests.harness.loopback import LOCALHOST, wait_until
from tests.harness.promharness import (
    LoopbackProcess,
    MetricsServer,
    installed_binary,
    scrape_config,
)

DEFAULT_VICTORIA_METRICS_BIN = "/usr/bin/victoria-metrics"
DEFAULT_VMALERT_BIN = "/usr/bin/vmalert"
#: Environment variables that may point at other binaries.
VICTORIA_METRICS_BIN_ENV = "DECICE_VICTORIA_METRICS_BIN"
VMALERT_BIN_ENV = "DECICE_VMALERT_BIN"


def _binary(default: str, env: str, what: str) -> str:
    return installed_binary(default, env, what, "victoria-metrics")


def victoria_metrics_binary() -> str:
    """Path of victoria-metrics; fails the test (never skips it) when it is missing."""
    return _binary(DEFAULT_VICTORIA_METRICS_BIN, VICTORIA_METRICS_BIN_ENV, "victoria-metrics")


def vmalert_binary() -> str:
    """Path of vmalert; fails the test (never skips it) when it is missing."""
    return _binary(DEFAULT_VMALERT_BIN, VMALERT_BIN_ENV, "vmalert")


def prometheus_text(openmetrics: str) -> tuple[str, list[float]]:
    """OpenMetrics samples (timestamps in seconds) as Prometheus text (milliseconds), the
    format of ``/api/v1/import/prometheus``, and the sample times, sorted."""
    lines = []
    stamps = set()
    for line in openmetrics.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value, stamp = line.rsplit(" ", 2)
        at = float(stamp)
        stamps.add(at)
        lines.append(f"{series} {value} {round(at * 1000)}\n")
    return "".join(lines), sorted(stamps)


def flush(url: str, timeout: float = 5.0) -> None:
    """``/internal/force_flush``: what the server at ``url`` holds in memory answers queries."""
    with urllib.request.urlopen(f"{url}/internal/force_flush", timeout=timeout) as response:
        assert response.status == 200, f"force_flush: HTTP {response.status}"


def import_history(url: str, openmetrics: str, timeout: float = 30.0) -> None:
    """Load ``openmetrics`` (``StockExporter.history()``) into the VictoriaMetrics at
    ``url`` and wait until its first samples answer queries.

    Imported rows become searchable after the server's next in-memory flush (about a
    second); ``flush`` does it at once, and the wait checks it did."""
    text, stamps = prometheus_text(openmetrics)
    assert stamps, "no samples in the history"
    request = urllib.request.Request(
        f"{url}/api/v1/import/prometheus", data=text.encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.status == 204, f"import: HTTP {response.status}"
    series = {line.rsplit(" ", 2)[0] for line in text.splitlines()}
    first = stamps[0]

    def visible() -> bool:
        flush(url, timeout)
        # At the first sample's time only imported series exist (nothing was scraped yet).
        qs = urllib.parse.urlencode({"query": 'count({__name__!=""})', "time": f"{first:.3f}"})
        with urllib.request.urlopen(f"{url}/api/v1/query?{qs}", timeout=timeout) as response:
            result = json.load(response)["data"]["result"]
        return bool(result) and int(float(result[0]["value"][1])) == len(series)

    wait_until(visible, timeout, f"the {len(series)} imported series answer queries")


class VMAlert(LoopbackProcess):
    """vmalert evaluating ``rule_files`` against ``datasource`` every second and writing
    the recorded series back to it (remote write)."""

    name = "vmalert"
    ready_path = "/health"

    def __init__(self, binary: str, workdir: Path, datasource: str, rule_files: list[str]) -> None:
        super().__init__(binary, workdir, workdir / "vmalert.log")
        self.datasource = datasource
        self.rule_files = rule_files

    def command(self) -> list[str]:
        return [
            self.binary,
            *(f"-rule={f}" for f in self.rule_files),
            f"-datasource.url={self.datasource}",
            f"-remoteWrite.url={self.datasource}",
            f"-httpListenAddr={LOCALHOST}:{self.port}",
            # Prometheus' evaluation_interval in promharness.
            "-evaluationInterval=1s",
            # Results are sent in batches every 5 s by default: longer than the 5 s
            # lookback, so recorded series would blink out between two batches.
            "-remoteWrite.flushInterval=200ms",
            "-loggerLevel=WARN",  # rule errors only
        ]


class VictoriaMetricsServer(MetricsServer):
    """A real single-node VictoriaMetrics on 127.0.0.1 scraping ``targets`` every second,
    with vmalert for ``rule_files`` and ``history`` imported on the first start.

    ``lookback`` plays ``PrometheusServer``'s ``lookback_delta`` (5 s, for the same
    reasons: a series gone from the exporter, or written before a stop, is gone within
    seconds). VictoriaMetrics' scraper starts at once (no 5 s target sync as in
    Prometheus 2.42): the first scrape lands within a second of ``start()``.

    ``reload()`` re-reads the scrape config (SIGHUP) and waits until the targets are the
    ones written: VictoriaMetrics has no synchronous reload endpoint.
    """

    name = "victoria-metrics"
    kind = "victoriametrics"
    ready_path = "/health"

    def __init__(
        self,
        targets: list[str],
        *,
        workdir: Path | None = None,
        binary: str | None = None,
        vmalert: str | None = None,
        port: int | None = None,
        lookback: str | None = "5s",
        ready_timeout: float = 30.0,
        job_name: str = "fake-exporter",
        rule_files: list[Path] | None = None,
        history: str | None = None,
    ) -> None:
        super().__init__(
            binary=binary
            or os.environ.get(VICTORIA_METRICS_BIN_ENV)
            or DEFAULT_VICTORIA_METRICS_BIN,
            workdir=workdir,
            prefix="vmharness",
            port=port,
            ready_timeout=ready_timeout,
            job_name=job_name,
        )
        self.lookback = lookback
        self.rule_files = [str(f) for f in rule_files or []]
        self._history = history
        self.vmalert: VMAlert | None = None
        if self.rule_files:
            binary = vmalert or os.environ.get(VMALERT_BIN_ENV) or DEFAULT_VMALERT_BIN
            self.vmalert = VMAlert(binary, self.workdir, self.url, self.rule_files)
        self.write_config(targets)

    @property
    def api_url(self) -> str:
        """The query API under ``/prometheus``: a base URL with a path, as a cluster's
        ``http://vmselect:8481/select/<accountID>/prometheus`` has."""
        return f"{self.url}/prometheus"

    @property
    def config_file(self) -> Path:
        return self.workdir / "scrape.yml"

    def write_config(self, targets: list[str]) -> None:
        """(Re)write the scrape config; call ``reload()`` afterwards if running."""
        # JSON is valid YAML, so no YAML writer is needed.
        self.config_file.write_text(json.dumps(scrape_config(self.job_name, targets), indent=2))

    def command(self) -> list[str]:
        return [
            self.binary,
            f"-httpListenAddr={LOCALHOST}:{self.port}",
            f"-storageDataPath={self.data_dir}",
            f"-promscrape.config={self.config_file}",
            # Queries at "now" are evaluated 30 s in the past by default (samples younger
            # than that are taken as incomplete): a changed value would show 30 s late.
            "-search.latencyOffset=0s",
            # How far back a bare selector looks for a sample (Prometheus'
            # --query.lookback-delta; None: VictoriaMetrics' default, the query's step, 5 m
            # for an instant query): a series written before a stop gets no staleness
            # marker and would stay for minutes after a restart.
            *([] if self.lookback is None else [f"-search.maxLookback={self.lookback}"]),
            # No response cache: a cached answer computed before an import (of history)
            # would hide the imported samples (what the flag's help advises when
            # backfilling).
            "-search.disableCache",
            "-loggerLevel=WARN",  # the log holds what went wrong (scrape errors), no chatter
        ]

    # -- lifecycle
    def start(self) -> None:
        """Start (or restart) on the same port and data dir, history imported on the first
        start, then vmalert; wait until both are ready."""
        first = not self._started_once
        super().start()
        try:
            if first and self._history is not None:
                import_history(self.url, self._history)
            if self.vmalert is not None:
                self.vmalert.datasource = self.url  # the port may have changed on a lost race
                self.vmalert.start()
        except BaseException:
            self.stop()  # no server left running when start() fails
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop vmalert, then the server. Idempotent."""
        if self.vmalert is not None:
            self.vmalert.stop(timeout)
        super().stop(timeout)

    def settle(self) -> None:
        """Flush (``/internal/force_flush``): buffered samples and new series' index
        entries become searchable, and the cache of which series match a selector is
        reset. VictoriaMetrics resets that cache only every 10 s by itself, so a selector
        asked before its series existed keeps answering "nothing" for up to 10 s (a
        difference docs/backends.md describes); each poll flushing, ``wait_for`` sees a
        new series a scrape after it appeared, as on Prometheus, and the queries right
        after it (the extender's) see the same."""
        flush(self.url)

    def reload(self) -> None:
        """Re-read the scrape config (SIGHUP) and wait until it scrapes its targets."""
        assert self._proc is not None and self.running, "not running"
        config = json.loads(self.config_file.read_text())
        wanted = {
            f"http://{target}/metrics"
            for job in config["scrape_configs"]
            for static in job["static_configs"]
            for target in static["targets"]
        }
        self._proc.send_signal(signal.SIGHUP)

        def scraping() -> bool:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=5) as response:
                active = json.load(response)["data"]["activeTargets"]
            return {t["scrapeUrl"] for t in active} == wanted

        wait_until(scraping, 30, f"{self.name} scrapes {sorted(wanted)}")

    def log_tail(self, lines: int = 30) -> str:
        tail = super().log_tail(lines)
        if self.vmalert is None:
            return tail
        return f"{tail}\n--- vmalert:\n{self.vmalert.log_tail(lines)}"
