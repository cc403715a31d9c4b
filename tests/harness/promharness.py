"""Test harness: a real Prometheus server scraping a fake, test-controlled exporter.

Everything listens on 127.0.0.1 only.

``FakeExporter`` models a stock kube-prometheus-stack *after its recording rules ran*
(node-mixin's rules and kubernetes-mixin's `rules/node.libsonnet`): per node it serves

* ``instance:node_cpu_utilisation:rate5m{job="node-exporter",instance="<ip>:9100",
  namespace="monitoring",pod="node-exporter-<node>"}`` (no ``node`` label, as in a stock
  install), and
* ``node_namespace_pod:kube_pod_info:{namespace="monitoring",pod="node-exporter-<node>",
  node="<node>"} 1`` (the series the stock join uses to map pods to nodes),

plus two simple series for other label styles: ``decice_node_cpu{node=...}`` and
``decice_node_mem{nodename=...}``.

``PrometheusServer`` runs ``/usr/bin/prometheus`` (2.42 flags) with a 1 s scrape and
evaluation interval and ``honor_labels: true`` so the exporter's ``job``/``instance``
labels survive, as they do for the series of a stock install.

What every backend's server shares lives here too: ``LoopbackProcess`` (start on a free
loopback port, wait until ready, stop, log), ``scrape_config`` and ``MetricsServer`` (the
surface tests use: ``query``, ``wait_for``, ``wait_for_first_scrape``...), which
``PrometheusServer`` and ``tests.harness.vmharness.VictoriaMetricsServer`` both are.

The module also holds the fixture bodies as plain context managers
(``running_exporter``, ``running_prometheus``) and the check for the binary
(``prometheus_binary``: a missing one fails the test, it is never skipped);
``tests/harness/prometheus_fixtures.py`` wraps them as fixtures.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

from tests.harness.loopback import LOCALHOST, LoopbackServer, free_port

DEFAULT_PROMETHEUS_BIN = "/usr/bin/prometheus"
#: Environment variable that may point at another prometheus binary.
PROMETHEUS_BIN_ENV = "DECICE_PROMETHEUS_BIN"

#: The 5-minute node CPU query that works on a stock kube-prometheus-stack
#: (docs/configuration.md shows the shipped one, which also reads a 1-minute rate).
STOCK_NODE_CPU_QUERY = (
    'max by (node) (instance:node_cpu_utilisation:rate5m{job="node-exporter"}'
    " * on (namespace, pod) group_left (node)"
    " topk by (namespace, pod) (1, node_namespace_pod:kube_pod_info:))"
)
#: Every metric name the exporter serves (used to check that Prometheus sees nothing).
EXPORTER_METRICS = (
    "instance:node_cpu_utilisation:rate5m",
    "node_namespace_pod:kube_pod_info:",
    "decice_node_cpu",
    "decice_node_mem",
)
ANY_EXPORTER_SERIES_QUERY = f"count({{__name__=~{json.dumps('|'.join(EXPORTER_METRICS))}}})"

Result = list[dict[str, Any]]


# --------------------------------------------------------------------------- helpers


def format_value(value: float) -> str:
    """A float in Prometheus text exposition format (``NaN``, ``+Inf``, ``-Inf``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _series(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {format_value(value)}\n"


def values_by(result: Result, label: str) -> dict[str, float]:
    """Map ``label`` value -> sample value for an instant-vector ``result``.

    Series without ``label`` are keyed by ``""``.
    """
    out: dict[str, float] = {}
    for item in result:
        metric = item.get("metric", {})
        out[str(metric.get(label, ""))] = float(item["value"][1])
    return out


def approx_values(
    expected: dict[str, float], label: str = "node", tol: float = 1e-6
) -> Callable[[Result], bool]:
    """A ``wait_for`` predicate: the result holds exactly ``expected`` (by ``label``)."""

    def predicate(result: Result) -> bool:
        got = values_by(result, label)
        if set(got) != set(expected):
            return False
        return all(math.isclose(got[k], v, abs_tol=tol) for k, v in expected.items())

    return predicate


# --------------------------------------------------------------------------- exporter


@dataclass
class _Node:
    cpu: float
    ip: str
    mem: float | None


class MetricsEndpoint:
    """A ``/metrics`` endpoint on 127.0.0.1 serving what ``_response`` returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                with endpoint._lock:
                    status, body = endpoint._response()
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = LoopbackServer(Handler, name=type(self).__name__)

    def _response(self) -> tuple[int, str]:
        """(HTTP status, exposition text); called with ``self._lock`` held."""
        raise NotImplementedError

    # -- addresses
    @property
    def port(self) -> int:
        return self._server.port

    @property
    def target(self) -> str:
        """``host:port`` for a Prometheus ``static_configs`` target."""
        return f"{LOCALHOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"

    # -- lifecycle
    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FakeExporter(MetricsEndpoint):
    """Per-node values the test controls, shaped as after a stock install's recording rules.

    Thread-safe: ``set``/``remove``/``serve_raw``/``reset`` may be called from the test
    while Prometheus scrapes.
    """

    NAMESPACE = "monitoring"

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._raw: str | None = None
        self._status = 200
        super().__init__()

    # -- control
    def set(self, node: str, cpu: float, ip: str | None = None, mem: float | None = None) -> None:
        """Add or update ``node``. ``ip`` defaults to the node's previous IP, else a
        stable 10.0.x.y address; ``mem`` ``None`` keeps the previous value (or none)."""
        with self._lock:
            old = self._nodes.get(node)
            if ip is None:
                ip = old.ip if old else self._default_ip(node)
            if mem is None and old is not None:
                mem = old.mem
            self._nodes[node] = _Node(cpu=cpu, ip=ip, mem=mem)

    def remove(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)

    def serve_raw(self, text: str | None, status: int = 200) -> None:
        """Serve ``text`` verbatim (garbage, NaN/+Inf, duplicates...) with HTTP ``status``
        instead of the modelled series; ``None`` goes back to the modelled series."""
        with self._lock:
            self._raw = text
            self._status = status if text is not None else 200

    def reset(self) -> None:
        """Forget all nodes and any raw override."""
        with self._lock:
            self._nodes.clear()
            self._raw = None
            self._status = 200

    def nodes(self) -> dict[str, float]:
        with self._lock:
            return {name: n.cpu for name, n in self._nodes.items()}

    def ip_of(self, node: str) -> str:
        with self._lock:
            return self._nodes[node].ip

    def render(self) -> str:
        """The body the next scrape gets."""
        with self._lock:
            return self._response()[1]

    # -- internals
    def _default_ip(self, node: str) -> str:
        used = {n.ip for n in self._nodes.values()}
        i = len(self._nodes) + 1
        while True:
            ip = f"10.0.{i // 250}.{i % 250 + 1}"
            if ip not in used:
                return ip
            i += 1

    def _response(self) -> tuple[int, str]:
        if self._raw is not None:
            return self._status, self._raw
        return 200, self._render_nodes(self._nodes)

    def _render_nodes(self, nodes: dict[str, _Node]) -> str:
        ns = self.NAMESPACE
        cpu = ["# TYPE instance:node_cpu_utilisation:rate5m gauge\n"]
        info = ["# TYPE node_namespace_pod:kube_pod_info: gauge\n"]
        simple = ["# TYPE decice_node_cpu gauge\n"]
        mem = ["# TYPE decice_node_mem gauge\n"]
        for name in sorted(nodes):
            n = nodes[name]
            pod = f"node-exporter-{name}"
            cpu.append(
                _series(
                    "instance:node_cpu_utilisation:rate5m",
                    {
                        "job": "node-exporter",
                        "instance": f"{n.ip}:9100",
                        "namespace": ns,
                        "pod": pod,
                    },
                    n.cpu,
                )
            )
            info.append(
                _series(
                    "node_namespace_pod:kube_pod_info:",
                    {"namespace": ns, "pod": pod, "node": name},
                    1.0,
                )
            )
            simple.append(_series("decice_node_cpu", {"node": name}, n.cpu))
            if n.mem is not None:
                mem.append(_series("decice_node_mem", {"nodename": name}, n.mem))
        return "".join(cpu + info + simple + mem)


class StockExporter(MetricsEndpoint):
    """The raw series of a stock kube-prometheus-stack, *before* its recording rules.

    Per node: node-exporter's ``node_cpu_seconds_total`` counters for ``CPUS`` cpus and
    every mode, labelled as prometheus-operator's ServiceMonitor labels them (``job=
    "node-exporter"``, ``instance="<ip>:9100"``, ``namespace``, ``pod``, ``service``,
    ``endpoint``, ``container``; no ``node``), and kube-state-metrics' ``kube_pod_info``
    for that node-exporter pod and for an application pod beside it, plus a pending pod
    (``node=""``). The counters advance with wall-clock time at the utilisation set per
    node, so ``rate()`` over them gives that utilisation back; ``history()`` writes the
    same counters for the past, for ``promtool tsdb create-blocks-from openmetrics``, so a
    ``[5m]`` rate is whole from the first scrape.
    """

    CPUS = 2
    NAMESPACE = "monitoring"
    #: mode -> its share of busy (user, system) or of idle (idle, iowait, steal) time.
    BUSY: ClassVar[dict[str, float]] = {"user": 0.75, "system": 0.25}
    IDLE: ClassVar[dict[str, float]] = {"idle": 0.8, "iowait": 0.1, "steal": 0.1}

    def __init__(self) -> None:
        # node -> ip, utilisation, since (last change), busy and idle seconds at `since`
        self._nodes: dict[str, tuple[str, float, float, float, float]] = {}
        super().__init__()

    def set(
        self, node: str, utilisation: float, now: float | None = None, ip: str | None = None
    ) -> None:
        """From ``now`` (default: the present) on, ``node`` is busy ``utilisation`` of the time.
        ``ip``: its InternalIP (default: its previous one, else a new 10.0.0.x); two nodes
        may share one, as edge sites reusing private addresses do."""
        t = time.time() if now is None else now
        with self._lock:
            old = self._nodes.get(node)
            ip = ip or (old[0] if old else f"10.0.0.{len(self._nodes) + 10}")
            busy, idle = self._seconds(node, t) if old else (0.0, 0.0)
            self._nodes[node] = (ip, utilisation, t, busy, idle)

    def history(self, start: float, end: float, step: float) -> str:
        """The counters from ``start`` to ``end`` every ``step`` s, as OpenMetrics text."""
        lines = ["# TYPE node_cpu_seconds counter\n"]
        with self._lock:
            series = [labels for labels, _ in self._counters(start)]
            steps = int((end - start) // step) + 1
            samples = [self._counters(start + i * step) for i in range(steps)]
        for k, labels in enumerate(series):  # OpenMetrics: one series' samples together
            for i, at in enumerate(samples):
                sample = _series("node_cpu_seconds_total", labels, at[k][1])[:-1]
                lines.append(f"{sample} {start + i * step:.3f}\n")
        lines.append("# EOF\n")
        return "".join(lines)

    def _seconds(self, node: str, t: float) -> tuple[float, float]:
        """Busy and idle seconds per cpu of ``node`` at ``t``."""
        _, u, since, busy, idle = self._nodes[node]
        return busy + u * (t - since), idle + (1 - u) * (t - since)

    def _counters(self, t: float) -> list[tuple[dict[str, str], float]]:
        out = []
        for node in sorted(self._nodes):
            busy, idle = self._seconds(node, t)
            for cpu in range(self.CPUS):
                for mode, share in (*self.BUSY.items(), *self.IDLE.items()):
                    labels = {
                        **self._target(node),
                        "cpu": str(cpu),
                        "mode": mode,
                    }
                    out.append((labels, 1000.0 + share * (busy if mode in self.BUSY else idle)))
        return out

    def _target(self, node: str) -> dict[str, str]:
        """The labels prometheus-operator gives the node-exporter target on ``node``."""
        return {
            "job": "node-exporter",
            "instance": f"{self._nodes[node][0]}:9100",
            "namespace": self.NAMESPACE,
            "pod": f"node-exporter-{node}",
            "service": "kube-prometheus-stack-prometheus-node-exporter",
            "endpoint": "http-metrics",
            "container": "node-exporter",
        }

    def _response(self) -> tuple[int, str]:
        out = ["# TYPE node_cpu_seconds_total counter\n"]
        out += [_series("node_cpu_seconds_total", lb, v) for lb, v in self._counters(time.time())]
        out.append("# TYPE kube_pod_info gauge\n")
        ksm = {"job": "kube-state-metrics", "instance": "10.1.0.5:8080"}
        for node in sorted(self._nodes):
            ip = self._nodes[node][0]
            for ns, pod in ((self.NAMESPACE, f"node-exporter-{node}"), ("shop", f"web-{node}")):
                info = {"namespace": ns, "pod": pod, "uid": f"uid-{pod}", "host_ip": ip}
                out.append(_series("kube_pod_info", {**ksm, **info, "node": node}, 1.0))
        pending = {"namespace": "shop", "pod": "pending", "uid": "uid-pending", "node": ""}
        out.append(_series("kube_pod_info", {**ksm, **pending}, 1.0))
        return 200, "".join(out)


# --------------------------------------------------------------------------- servers


class LoopbackProcess:
    """A server process we start on 127.0.0.1, at a free port, logging to one file.

    ``start()`` runs ``command()`` and waits until ``ready_path`` answers 200 (a lost race
    for the port is retried on another one, first start only); ``stop()`` sends SIGTERM,
    then SIGKILL after a timeout. Subclasses name the binary's flags in ``command()``.
    """

    #: Names the process in messages.
    name: ClassVar[str] = "server"
    #: Answers 200 once the server serves.
    ready_path: ClassVar[str] = "/-/ready"

    def __init__(
        self,
        binary: str,
        workdir: Path,
        log_file: Path,
        *,
        port: int | None = None,
        ready_timeout: float = 30.0,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.log_file = log_file
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()
        self.ready_timeout = ready_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_once = False
        self._started_at = 0.0

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start (or restart) on the same port and data dir; wait until ready."""
        if self.running:
            return
        attempts = 1 if (self._fixed_port or self._started_once) else 3
        last_error: AssertionError | None = None
        for _ in range(attempts):
            try:
                self._start_once()
                self._started_once = True
                self._started_at = time.time()
                return
            except AssertionError as e:
                last_error = e
                if "address already in use" not in str(e):
                    raise
                self.port = free_port()  # lost a race for the port: pick another
        assert last_error is not None
        raise last_error

    def _start_once(self) -> None:
        cmd = self.command()
        with self.log_file.open("ab") as log:
            log.write(f"--- starting: {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
            )
        deadline = time.monotonic() + self.ready_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise AssertionError(
                    f"{self.name} exited with {code} before ready:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}{self.ready_path}", timeout=1) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except (OSError, urllib.error.URLError) as e:
                last = repr(e)
            time.sleep(0.1)
        self.stop()
        raise AssertionError(
            f"{self.name} not ready at {self.url} after {self.ready_timeout}s ({last}):\n"
            f"{self.log_tail()}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate (SIGTERM), wait, and kill on timeout. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def scrape_config(job_name: str, targets: list[str]) -> dict[str, Any]:
    """The scrape part of a Prometheus-format config every server here reads: every
    ``targets`` scraped each second, their ``job``/``instance`` labels honoured."""
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": job_name,
                "honor_labels": True,
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }


class MetricsServer(LoopbackProcess):
    """A server of the Prometheus query API that scrapes the exporters of this module:
    the surface the tests use, whichever backend runs (``PrometheusServer`` here,
    ``tests.harness.vmharness.VictoriaMetricsServer``). ``workdir`` None: a temporary
    one, removed by ``close()``."""

    #: Which backend this is: the test id of ``prometheus_fixtures.BACKENDS``.
    kind: ClassVar[str] = ""

    def __init__(
        self,
        *,
        binary: str,
        workdir: Path | None,
        prefix: str,
        port: int | None = None,
        ready_timeout: float = 30.0,
        job_name: str = "fake-exporter",
    ) -> None:
        own = workdir is None
        workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-")) if workdir is None else workdir
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(
            binary,
            workdir,
            workdir / f"{self.name}.log",
            port=port,
            ready_timeout=ready_timeout,
        )
        self._own_workdir = own
        self.job_name = job_name
        self.data_dir = self.workdir / "data"

    @property
    def api_url(self) -> str:
        """A base URL of the query API with a path (``url`` itself where there is none)."""
        return self.url

    # -- the scrape config
    @property
    def config_file(self) -> Path:
        raise NotImplementedError

    def write_config(self, targets: list[str]) -> None:
        """(Re)write the scrape config; call ``reload()`` afterwards if running."""
        raise NotImplementedError

    def reload(self) -> None:
        """Make a running server read its scrape config again, and return once it has."""
        raise NotImplementedError

    # -- lifecycle
    def close(self) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queries
    def query(self, promql: str, timeout: float = 5.0, at: float | None = None) -> Result:
        """One instant query (at ``at``, default now); returns ``data.result`` (a vector's
        list of series).

        Raises ``OSError``/``URLError`` if the server does not answer and
        ``AssertionError`` if it answers with an error.
        """
        params = {"query": promql} if at is None else {"query": promql, "time": f"{at:.3f}"}
        qs = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{qs}", timeout=timeout) as r:
                payload = json.load(r)
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            raise AssertionError(f"query {promql!r} failed: HTTP {e.code}: {body}") from e
        if payload.get("status") != "success":
            raise AssertionError(f"query {promql!r} failed: {payload}")
        data = payload["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: Result = data["result"]
        return result

    def wait_for(
        self,
        query: str,
        predicate: Callable[[Result], bool],
        timeout: float = 30.0,
        interval: float = 0.25,
    ) -> Result:
        """Poll ``query`` until ``predicate(result)`` holds; return that result.

        Connection errors (e.g. while restarting) are retried. On timeout raise an
        AssertionError carrying the last result or error.
        """
        deadline = time.monotonic() + timeout
        last: object = "no attempt"
        attempts = 0
        while True:
            attempts += 1
            try:
                self.settle()
                result = self.query(query, timeout=max(0.5, min(5.0, timeout)))
                if predicate(result):
                    return result
                last = result
            except (OSError, AssertionError, ValueError) as e:
                last = e
            if time.monotonic() + interval > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s ({attempts} polls) waiting on {query!r}; "
                    f"last result: {last!r}\n{self.name} log:\n{self.log_tail(10)}"
                )
            time.sleep(interval)

    def settle(self) -> None:
        """Before each ``wait_for`` poll: make what the server has stored answer queries
        (nothing to do for Prometheus)."""

    def wait_for_first_scrape(self, timeout: float = 30.0) -> None:
        """Wait until the scrape job has reported ``up`` once since the last start.

        Prometheus 2.x syncs scrape targets at most every 5 s, so the first scrape after
        a (re)start comes ~5 s late; ``wait_for`` timeouts must allow for that.
        """
        since = self._started_at
        self.wait_for(
            f'timestamp(up{{job="{self.job_name}"}})',
            lambda r: bool(r) and float(r[0]["value"][1]) >= since,
            timeout=timeout,
        )

    def wait_for_no_exporter_series(self, timeout: float = 30.0) -> None:
        """Wait until none of the exporter's metrics is visible (after ``reset()``)."""
        self.wait_for(ANY_EXPORTER_SERIES_QUERY, lambda r: not r, timeout=timeout)


class PrometheusServer(MetricsServer):
    """A real Prometheus on 127.0.0.1 scraping ``targets`` every second.

    ``lookback_delta`` defaults to 5 s instead of Prometheus' 5 min. Series that vanish
    from a successful scrape, or whose target fails, get staleness markers and disappear
    at once anyway; but samples written before a Prometheus stop get no markers, and
    after a restart they would stay visible for the whole lookback window. A short
    window makes "this node's series is gone" observable within seconds in every case.
    With a 1 s scrape interval, 5 s still tolerates a few missed scrapes.

    Prometheus 2.42 syncs scrape targets at most every 5 s (no flag changes that), so
    the first scrape after ``start()`` lands ~5 s after ``/-/ready``: keep ``wait_for``
    timeouts well above that (the default, 30 s, is a ceiling for a loaded machine) or
    call ``wait_for_first_scrape()``.
    """

    name = "prometheus"
    kind = "prometheus"

    def __init__(
        self,
        targets: list[str],
        *,
        workdir: Path | None = None,
        binary: str | None = None,
        port: int | None = None,
        lookback_delta: str = "5s",
        ready_timeout: float = 30.0,
        job_name: str = "fake-exporter",
        rule_files: list[Path] | None = None,
    ) -> None:
        super().__init__(
            binary=binary or os.environ.get(PROMETHEUS_BIN_ENV) or DEFAULT_PROMETHEUS_BIN,
            workdir=workdir,
            prefix="promharness",
            port=port,
            ready_timeout=ready_timeout,
            job_name=job_name,
        )
        self.lookback_delta = lookback_delta
        self.rule_files = [str(f) for f in rule_files or []]
        self.write_config(targets)

    @property
    def config_file(self) -> Path:
        return self.workdir / "prometheus.yml"

    def write_config(self, targets: list[str]) -> None:
        """(Re)write prometheus.yml; call ``reload()`` afterwards if running."""
        config = scrape_config(self.job_name, targets)
        config["global"]["evaluation_interval"] = "1s"
        config["rule_files"] = self.rule_files
        # JSON is valid YAML, so no YAML writer is needed.
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")

    def command(self) -> list[str]:
        return [
            self.binary,
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address={LOCALHOST}:{self.port}",
            "--web.enable-lifecycle",
            f"--query.lookback-delta={self.lookback_delta}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ]

    def reload(self) -> None:
        """Ask a running server to re-read prometheus.yml (``--web.enable-lifecycle``)."""
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200, f"reload failed: HTTP {resp.status}"


# --------------------------------------------------------------------------- fixtures


def installed_binary(default: str, env: str, what: str, package: str) -> str:
    """Path of `what`'s binary ($`env`, else `default`); fails the test (never skips it)
    when it is missing, naming scripts/setup and the Debian `package`."""
    binary = os.environ.get(env) or default
    if os.path.isfile(binary) and os.access(binary, os.X_OK):
        return binary
    pytest.fail(
        f"{what} binary not found at {binary}: run scripts/setup (it installs the Debian "
        f"package '{package}'), or set {env} to a {what} binary",
        pytrace=False,
    )


def prometheus_binary() -> str:
    """Path of the prometheus binary; fails the test (never skips it) when it is missing."""
    return installed_binary(DEFAULT_PROMETHEUS_BIN, PROMETHEUS_BIN_ENV, "prometheus", "prometheus")


def backfill(binary: str, history: str, workdir: Path) -> None:
    """Write OpenMetrics `history` into `workdir`/data as TSDB blocks (promtool, beside
    `binary`), so `[5m]` rates are complete from a new server's first scrape."""
    source = workdir.parent / f"{workdir.name}-history.om"
    source.write_text(history)
    promtool = str(Path(binary).with_name("promtool"))
    command = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source)]
    done = subprocess.run(
        [*command, str(workdir / "data")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def running_exporter() -> Iterator[FakeExporter]:
    with FakeExporter() as exporter:
        yield exporter


@contextlib.contextmanager
def running_prometheus(
    exporter: FakeExporter, workdir: Path | None = None
) -> Iterator[PrometheusServer]:
    """A started PrometheusServer scraping ``exporter``; fails if there is no binary."""
    binary = prometheus_binary()
    with PrometheusServer([exporter.target], workdir=workdir, binary=binary) as server:
        yield server
