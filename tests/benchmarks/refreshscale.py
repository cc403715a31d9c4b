"""The scale of a metrics answer: one refresh at 5,000 and 15,000 nodes (issue 28).

    python -m tests.benchmarks.refreshscale [--quick] [--sizes 5000,15000]
        [--backends prometheus,victoriametrics] [--reps 3] [--json FILE] [--no-load]
        [--no-profile] [--shipped-seconds S] [--switch-interval S] [--unfrozen]
        [--in-process] [--no-handover]
        [--pods N] [--timeout S]

Per backend and node count: a real Prometheus (promharness.PrometheusServer, its TSDB
backfilled by promtool) and a real VictoriaMetrics (vmharness.VictoriaMetricsServer, the
series imported), both on 127.0.0.1, holding the series a stock kube-prometheus-stack
records (promharness `FakeExporter`) for CPU and memory, five
samples a minute apart, about one node in nine above the 0.9 threshold; read by the
two-metric pack config/policies/cpu-memory-spread.yaml (its queries verbatim, the cpu
one being the shipped config/extender.yaml's). Beside them, the series the herd guard's
default usage queries read (herdGuard.usageQuery, podUsageQuery; issue 34): for `--pods`
pods (100,000 by default, 1,000 with --quick) in Deployments of 25 (4,000 workloads),
spread over the nodes, the stock rules' per-container CPU
(`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m` and
`:sum_irate`) and
pod -> workload (`namespace_workload_pod:kube_pod_owner:relabel`) series and
kube-state-metrics' `kube_pod_created`, every pod created within the last minute (all of
them young: the pod query's worst case, 100,000 series in its answer). Measured:

- the phases of one refresh, medians of `--reps`: the HTTP GET of each query as the
  provider's session asks for it (same Accept-Encoding; the body as it came, its size on
  the wire against gunzipped), gunzip + orjson apart; the provider's own `query` (its
  answers' Content-Encoding and decoded size read through a hook on its session);
  `map_series`; `next_snapshot`; `build_tables`; `Engine.install` (the part on the
  event loop); `Refresher.refresh_once` whole (build_service's engine and refresher),
  as a share of the shipped 15 s interval; the usage fetch apart (the two queries' HTTP,
  their size, `fetch_usage` whole) and the same refresh with the fetch off
  (herdGuard.estimate request), interleaved;
- memory of one refresh: the tracemalloc peak above what was traced before it, the
  growth of the process' peak RSS (VmHWM reset through /proc/self/clear_refs) above its
  RSS before it, and the same for the first refresh (an empty engine filled);
- what the event loop would wait for the GIL while a refresh runs: a thread sleeping
  0.5 ms at a time, its oversleep, and the collector's full collections (gc.callbacks);
- the request path: the real service (`python -m extender serve`, as
  tests/benchmarks/bench.py runs it) answering /prioritize (up to 5,000 names a request,
  drawn from the nodes our filter passes, as the scheduler sends them) on one keep-alive
  client, bounded in count and time, in modes (see MODES): no refresh after the first,
  refreshes back to back without the usage fetch and with it, no refresh but the backend
  queried back to back by another process, and with --shipped-seconds every 15 s;
  interleaved rounds, medians; each run at least as long as three refreshes with the
  usage fetch (at 100,000 pods one takes seconds);
- a profile (cProfile) of each phase at the largest size: the top functions by own time.

--switch-interval starts the service (and runs the stall measurement) with another GIL
switch interval, patched in at start: no file changes. The service freezes its heap after
each install (extender.metrics.heap), and so does the stall measurement; --unfrozen adds a
mode, `refreshing_unfrozen`, refreshing back to back in a service with that patched out
(the code before it), interleaved with the others: the A/B of the freeze in one sitting.
At these sizes the service fetches, decodes and maps in its child process
(prometheus.childProcessAbove, extender.metrics.fetch_subprocess); --in-process adds a mode,
`refreshing_in_process`, refreshing back to back with that off: the A/B of the child.
The service shortens the GIL switch interval while a refresh builds its tables
(extender.metrics.refresher.BUILD_SWITCH_INTERVAL); --no-handover adds a mode,
`refreshing_5ms`, refreshing back to back with Python's 5 ms throughout; with both flags,
`refreshing_in_process_5ms` has neither (the code before both), and with
--shipped-seconds too, `shipped_in_process` is the shipped cadence without the child.
The backend `recorded` serves a real Prometheus' recorded answers from a process that
evaluates nothing, so what the request path pays is the refresh's own (on these two
cores, a backend evaluating back to back costs the request path by itself).

It prints numbers and judges none except against the targets it names (refresh under
25 % of the interval at 15,000 nodes; prioritize p99 while refreshing within 1.2x of
idle, and with the usage fetch within 1.2x of without it). Every server listens on
127.0.0.1; every loop is bounded in count and in time.
tests/benchmarks/test_refreshscale_quick.py runs `--quick` (50 nodes, 1,000 pods, one
repetition).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import dataclasses
import gc
import http.client
import io
import json
import math
import os
import pickle
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import requests
import yaml

from extender.decisions.model import NodeInventory, NodeName
from extender.decisions.state import build_tables
from extender.errors.causes import describe
from extender.metrics.providers import PrometheusProvider, map_series
from extender.metrics.refresher import next_snapshot
from extender.metrics.usage import fetch_usage
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import Service, build_service
from tests.benchmarks.bench import Budget, client_loop, node_names, pct, request_body, running
from tests.harness.loopback import end_process, free_port
from tests.harness.promharness import PrometheusServer, backfill, prometheus_binary
from tests.harness.vmharness import VictoriaMetricsServer, victoria_metrics_binary

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "config" / "policies" / "cpu-memory-spread.yaml"
HOST = "127.0.0.1"
BACKENDS = ("prometheus", "victoriametrics")
INTERVAL = 15.0
"""The shipped refresh interval (config/extender.yaml): the refresh's share is of this."""
SHARE_TARGET = 0.25
P99_TARGET = 1.2
BACK_TO_BACK = 0.05
"""The service's interval while it refreshes back to back."""
NO_REFRESH = 3600.0
NAMESPACE = "monitoring"
CPU = "instance:node_cpu_utilisation:rate5m"
MEMORY = "instance:node_memory_utilisation:ratio"
POD_INFO = "node_namespace_pod:kube_pod_info:"
SAMPLES = 5
"""Samples per series, one a minute up to the load; the backends look back an hour."""
STEP_S = 60
HOT = 0.9
"""The pack's filter threshold: nodes above it on either metric are not asked about."""


@dataclass(frozen=True)
class Plan:
    reps: int
    load_count: int
    load_seconds: float
    names: int
    """Node names per prioritize request (at most)."""
    profile_top: int
    switch_interval: float | None = None
    """The GIL switch interval (sys.setswitchinterval) of the service and of the stall
    measurement; None: Python's 5 ms."""
    shipped_seconds: float = 0.0
    """When > 0, a fourth mode, `shipped`: the shipped 15 s interval, the load this long
    (so that it holds a few refreshes)."""
    unfrozen: bool = False
    """Add the mode `refreshing_unfrozen`: refreshes back to back in a service whose heap
    freezing after each install (extender.metrics.heap) is patched out."""
    no_handover: bool = False
    """Add the mode `refreshing_5ms`: refreshes back to back with the build's shorter
    switch interval patched out."""
    in_process: bool = False
    """Add the mode `refreshing_in_process`: refreshes back to back with
    prometheus.childProcessAbove null (every answer decoded in the service's interpreter)."""
    pods: int = 100_000
    """Pods whose measured use the herd guard's usage queries read (every one young: the
    pod query's worst case), in workloads of PODS_PER_WORKLOAD."""
    timeout: float | None = None
    """prometheus.timeout in place of the pack's (5 s); None: the pack's."""


FULL = Plan(reps=3, load_count=5000, load_seconds=10.0, names=5000, profile_top=8)
QUICK = Plan(reps=1, load_count=200, load_seconds=0.5, names=5000, profile_top=3, pods=1_000)


# -- the cluster and its series ------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    names: list[str]
    ips: list[str]
    cpu: list[float]
    memory: list[float]

    @property
    def passing(self) -> list[str]:
        """The nodes the pack's filters pass (both metrics at or below 0.9)."""
        return [
            n for n, c, m in zip(self.names, self.cpu, self.memory, strict=True) if max(c, m) <= HOT
        ]


def cluster(n: int, seed: int = 28) -> Cluster:
    """n nodes with cloud-style names, an InternalIP each, and seeded CPU and memory
    utilisation (about one node in nine above the pack's 0.9 threshold)."""
    rng = random.Random(seed)
    ips = [f"10.{64 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}" for i in range(n)]
    cpu = [round(min(0.99, rng.betavariate(2, 3) * 1.3), 6) for _ in range(n)]
    memory = [round(rng.uniform(0.15, 0.92), 6) for _ in range(n)]
    return Cluster(node_names(n), ips, cpu, memory)


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def series(c: Cluster) -> list[tuple[str, str, list[float]]]:
    """(metric name, labels text, value per node) for every series, as a stock
    kube-prometheus-stack records them: node-exporter's per-instance recording rules
    (job, instance = <ip>:9100, namespace, pod; no node label) and the pod -> node map."""
    out: list[tuple[str, str, list[float]]] = []
    for i, node in enumerate(c.names):
        pod = f"node-exporter-{node}"
        target = {"job": "node-exporter", "instance": f"{c.ips[i]}:9100"}
        exporter = _labels({**target, "namespace": NAMESPACE, "pod": pod})
        out.append((CPU, exporter, [c.cpu[i]]))
        out.append((MEMORY, exporter, [c.memory[i]]))
        out.append((POD_INFO, _labels({"namespace": NAMESPACE, "pod": pod, "node": node}), [1.0]))
    return out


def stamps(now: float) -> list[int]:
    """SAMPLES timestamps (ms), one a minute, the last a second before `now`."""
    last = int(now) - 1
    return [(last - STEP_S * (SAMPLES - 1 - k)) * 1000 for k in range(SAMPLES)]


def openmetrics(c: Cluster, at_ms: Sequence[int]) -> str:
    """The series as OpenMetrics text for promtool (one series' samples together)."""
    by_family: dict[str, list[str]] = {CPU: [], MEMORY: [], POD_INFO: []}
    for name, labels, (value,) in series(c):
        lines = by_family[name]
        for t in at_ms:
            lines.append(f"{name}{labels} {value!r} {t / 1000:.3f}\n")
    out = []
    for name, lines in by_family.items():
        out.append(f"# TYPE {name} gauge\n")
        out.extend(lines)
    out.append("# EOF\n")
    return "".join(out)


# -- the pods the herd guard's usage queries read ----------------------------------------------

CONTAINER_CPU = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m"
CONTAINER_CPU_NOW = "node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate"
POD_OWNER = "namespace_workload_pod:kube_pod_owner:relabel"
POD_CREATED = "kube_pod_created"
USAGE_SERIES = (CONTAINER_CPU, CONTAINER_CPU_NOW, POD_OWNER, POD_CREATED)
PODS_PER_WORKLOAD = 25
"""100,000 pods make 4,000 Deployments."""
NAMESPACES = 40
YOUNG_S = 60.0
"""The pods were created up to this long before the backend was loaded: all of them stay
young (podUsageQuery: created in the last 15 minutes) for the 14 minutes after."""


@dataclass(frozen=True)
class Fleet:
    """Pods of Deployments spread over the cluster's nodes, one container each."""

    namespace: list[str]
    workload: list[str]
    pod: list[str]
    node: list[str]
    use: list[float]
    """Cores, the container's 5-minute rate."""
    age: list[float]
    """Seconds since its creation when the backend is loaded."""

    def __len__(self) -> int:
        return len(self.pod)

    @property
    def workloads(self) -> int:
        return len(set(zip(self.namespace, self.workload, strict=True)))


def fleet(c: Cluster, pods: int, seed: int = 34) -> Fleet:
    """`pods` pods, PODS_PER_WORKLOAD to a Deployment, seeded: each Deployment's pods use
    about its own figure (0.01..4 cores, log-uniform), on nodes drawn at random."""
    rng = random.Random(seed)
    count = max(1, pods // PODS_PER_WORKLOAD) if pods else 0
    scale = [math.exp(rng.uniform(math.log(0.01), math.log(4.0))) for _ in range(count)]
    out = Fleet([], [], [], [], [], [])
    for i in range(pods):
        w = i % count
        out.namespace.append(f"team-{w % NAMESPACES}")
        out.workload.append(f"app-{w}")
        out.pod.append(f"app-{w}-{w * 7919 % 10**10:010d}-{i:05d}")
        out.node.append(rng.choice(c.names))
        out.use.append(round(scale[w] * rng.uniform(0.7, 1.3), 6))
        out.age.append(round(rng.uniform(0.0, YOUNG_S), 3))
    return out


def usage_series(f: Fleet, now: float) -> list[tuple[str, str, float]]:
    """(metric name, labels text, value) as a stock kube-prometheus-stack records them:
    the per-container CPU rules (5-minute rate and irate; namespace, pod, container, node),
    the pod -> workload rule (namespace, workload, pod, workload_type) and
    kube-state-metrics' creation time."""
    out: list[tuple[str, str, float]] = []
    ksm = {"job": "kube-state-metrics", "instance": "10.1.0.5:8080"}
    for i in range(len(f)):
        ns, pod = f.namespace[i], f.pod[i]
        ids = {"namespace": ns, "pod": pod}
        container = {**ids, "container": "main", "node": f.node[i]}
        out.append((CONTAINER_CPU, _labels(container), f.use[i]))
        out.append((CONTAINER_CPU_NOW, _labels(container), f.use[i]))
        owner = {**ids, "workload": f.workload[i], "workload_type": "deployment"}
        out.append((POD_OWNER, _labels(owner), 1.0))
        created = {**ksm, **ids, "uid": f"uid-{i}"}
        out.append((POD_CREATED, _labels(created), float(int(now - f.age[i]))))
    return out


def history(c: Cluster, f: Fleet, now: float) -> str:
    """The nodes' series (SAMPLES each) and the pods' (two samples, the first and the last
    stamp: the usage queries are instant and the backends look back an hour; the
    VictoriaMetrics import waits for every series at the first) as OpenMetrics text."""
    at = stamps(now)
    nodes = openmetrics(c, at)
    if not len(f):
        return nodes
    by_family: dict[str, list[str]] = {name: [] for name in USAGE_SERIES}
    for name, labels, value in usage_series(f, now):
        by_family[name] += [f"{name}{labels} {value!r} {t / 1000:.3f}\n" for t in (at[0], at[-1])]
    out = [nodes.removesuffix("# EOF\n")]
    for name, lines in by_family.items():
        out.append(f"# TYPE {name} gauge\n")
        out.extend(lines)
    out.append("# EOF\n")
    return "".join(out)


# -- backends ------------------------------------------------------------------------------


def http_get(url: str, timeout: float = 30.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body: bytes = r.read()
    return body


def count_series(url: str, metric: str) -> int:
    qs = urllib.parse.urlencode({"query": f"count({metric})"})
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
        result = orjson.loads(http_get(f"{url}/api/v1/query?{qs}"))["data"]["result"]
        return int(float(result[0]["value"][1])) if result else 0
    return -1


def wait_for_series(url: str, n: int, pods: int = 0, seconds: float = 300.0) -> None:
    """Until every node metric has n series and every usage series `pods` visible at the
    current time (bounded)."""
    deadline = time.monotonic() + seconds
    want = {**dict.fromkeys((CPU, MEMORY, POD_INFO), n), **dict.fromkeys(USAGE_SERIES, pods)}
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = {m: count_series(url, m) for m in want}
        if counts == want:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url}: expected {want} series, have {counts}")


@contextlib.contextmanager
def prometheus(c: Cluster, f: Fleet, work: Path) -> Iterator[str]:
    """A real Prometheus (promharness.PrometheusServer, no scrape target) whose TSDB was
    backfilled with the series by promtool; looks back an hour, so they stay visible."""
    binary = prometheus_binary()
    workdir = work / "prometheus"
    workdir.mkdir()
    backfill(binary, history(c, f, time.time()), workdir)
    with PrometheusServer([], workdir=workdir, binary=binary, lookback_delta="1h") as server:
        wait_for_series(server.url, len(c.names), len(f))
        yield server.url


class ManySeriesVictoriaMetrics(VictoriaMetricsServer):
    """VictoriaMetrics refuses a query that selects more than -search.maxUniqueTimeseries
    series (300,000 by default in Debian's build): the import check (vmharness counts every
    series) selects them all, 415,000 at 5,000 nodes and 100,000 pods. The usage queries
    select 200,000 there (two series a pod each), under the default; beyond 150,000 pods
    they would be refused too."""

    def command(self) -> list[str]:
        return [*super().command(), "-search.maxUniqueTimeseries=2000000"]


@contextlib.contextmanager
def victoria_metrics(c: Cluster, f: Fleet, work: Path) -> Iterator[str]:
    """A real VictoriaMetrics (vmharness.VictoriaMetricsServer, no scrape target) with the
    series imported through its import API; looks back an hour, so they stay visible."""
    text = history(c, f, time.time())
    binary = victoria_metrics_binary()
    workdir = work / "victoria-metrics"
    workdir.mkdir()
    server = ManySeriesVictoriaMetrics(
        [], workdir=workdir, binary=binary, lookback="1h", history=text, ready_timeout=60
    )
    del text
    with server:
        wait_for_series(server.url, len(c.names), len(f))
        yield server.url


Starter = Callable[[Cluster, Fleet, Path], contextlib.AbstractContextManager[str]]
REPLAY = """
import http.server, pickle, sys, urllib.parse
answers = pickle.loads(open(sys.argv[1], "rb").read())

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("query", [""])
        encoding, body = answers.get(query[0], ("identity", b'{"status":"error"}'))
        self.send_response(200 if query[0] in answers else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if encoding != "identity":
            self.send_header("Content-Encoding", encoding)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a service stopped mid-connection (its fetch process killed): nothing to say

server = Server(("127.0.0.1", int(sys.argv[2])), Handler)
print("ready", flush=True)
server.serve_forever()
"""
"""The `recorded` backend's server: each recorded answer as it came, for its query."""


@contextlib.contextmanager
def recorded(c: Cluster, f: Fleet, work: Path) -> Iterator[str]:
    """The answers a real Prometheus gave to the pack's queries and the usage queries
    (recorded gzipped, as the provider asks), then served as recorded by a loopback
    process that evaluates nothing: what a refresh costs the request path when the
    backend runs on other machines, not on these two cores."""
    with prometheus(c, f, work) as url:
        settings = settings_for(url)
        guard = settings.herd_guard
        queries = [m.query for m in settings.fetched_metrics]
        queries += [guard.usage_query.replace("{quantile}", f"{guard.quantile:g}")]
        queries += [guard.pod_usage_query]
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=60)
        answers: dict[str, tuple[str, bytes]] = {}
        for query in queries:
            qs = urllib.parse.urlencode({"query": query, "timeout": "30s"})
            conn.request("GET", f"/api/v1/query?{qs}", headers={"Accept-Encoding": "gzip"})
            response = conn.getresponse()
            answers[query] = (response.getheader("Content-Encoding") or "identity", response.read())
        conn.close()
    store = work / "answers.pickle"
    store.write_bytes(pickle.dumps(answers))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", REPLAY, str(store), str(port)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError("the replay server did not start")
        yield f"http://{HOST}:{port}"
    finally:
        end_process(proc)


BACKEND_STARTERS: dict[str, Starter] = {
    "prometheus": prometheus,
    "victoriametrics": victoria_metrics,
    "recorded": recorded,
}


# -- the policy ----------------------------------------------------------------------------


def policy(
    url: str, port: int, interval: float, usage: bool = True, timeout: float | None = None
) -> dict[str, Any]:
    """The two-metric pack (cpu-memory-spread.yaml) pointed at `url`, bind off (no
    Kubernetes here), the herd guard on as shipped; `usage`: its estimates read the pods'
    measured use (herdGuard.estimate usage, the default: two more queries a refresh), else
    requests (estimate request: the node metrics alone); `timeout`: prometheus.timeout in
    place of the pack's 5 s (to measure a query that takes longer)."""
    raw: dict[str, Any] = yaml.safe_load(PACK.read_text())
    raw["server"] = {"host": HOST, "port": port}
    raw["prometheus"] = {**raw["prometheus"], "url": url, "interval": interval}
    if timeout is not None:
        raw["prometheus"]["timeout"] = timeout
    raw["bind"] = {"enabled": False}
    raw["herdGuard"] = {**raw.get("herdGuard", {}), "estimate": "usage" if usage else "request"}
    return raw


def settings_for(
    url: str, interval: float = INTERVAL, usage: bool = True, timeout: float | None = None
) -> Settings:
    return parse_settings(policy(url, free_port(), interval, usage, timeout), environ={})


# -- the phases of one refresh -------------------------------------------------------------


def rss_kib(pid: int | str = "self") -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def reset_peak_rss() -> bool:
    """Reset this process' VmHWM to its VmRSS (Linux: write 5 to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Responses:
    """The provider's own HTTP responses, through a hook on its requests session when it
    has one (the session it gives PrometheusConnect; an older tree's was the client's
    `_session`): how they were encoded and how large they were decoded."""

    def __init__(self, provider: PrometheusProvider) -> None:
        self.kept: list[requests.Response] = []
        session = getattr(provider, "_session", None)
        if session is None:
            session = getattr(getattr(provider, "_client", None), "_session", None)
        self.hooked = isinstance(session, requests.Session)
        if isinstance(session, requests.Session):
            session.hooks["response"].append(self._keep)

    def _keep(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.kept.append(response)

    def take(self) -> tuple[str, int]:
        """(Content-Encoding, bytes decoded) of the responses since the last call, then
        forgets them."""
        encodings = {r.headers.get("Content-Encoding", "identity") for r in self.kept}
        body = sum(len(r.content) for r in self.kept)
        self.kept.clear()
        return ",".join(sorted(encodings)) or "?", body


class Probe:
    """The same GET as the provider's (its session's Accept-Encoding), on a keep-alive
    http.client connection that leaves the body as it came: its time, its encoding and
    its size on the wire (chunked framing aside), then gunzip + orjson timed apart."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self._conn = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=30)
        self._timeout = f"{timeout:g}s"
        self._headers = {
            "Accept-Encoding": str(requests.utils.default_headers()["Accept-Encoding"])
        }

    def get(self, promql: str) -> tuple[float, float, str, int, int]:
        """(HTTP ms, decode ms, Content-Encoding, bytes on the wire, bytes decoded)."""
        qs = urllib.parse.urlencode({"query": promql, "timeout": self._timeout})
        t0 = time.perf_counter()
        self._conn.request("GET", f"/api/v1/query?{qs}", headers=self._headers)
        response = self._conn.getresponse()
        wire = response.read()
        t1 = time.perf_counter()
        if response.status != 200:
            raise RuntimeError(f"query answered HTTP {response.status}: {wire[:200]!r}")
        encoding = response.getheader("Content-Encoding") or "identity"
        body = zlib.decompress(wire, 47) if encoding == "gzip" else wire  # 47: gzip or zlib
        orjson.loads(body)
        t2 = time.perf_counter()
        return (t1 - t0) * 1000, (t2 - t1) * 1000, encoding, len(wire), len(body)

    def close(self) -> None:
        self._conn.close()


@dataclass
class Phases:
    series: int = 0
    encoding: str = ""
    """Content-Encoding of the provider's own answers (from its session)."""
    probe_encoding: str = ""
    wire_bytes: int = 0
    body_bytes: int = 0
    http_ms: float = 0.0
    decode_ms: float = 0.0
    query_ms: float = 0.0
    map_ms: float = 0.0
    snapshot_ms: float = 0.0
    build_ms: float = 0.0
    install_ms: float = 0.0
    refresh_ms: float = 0.0
    usage_http_ms: float = 0.0
    """The two usage queries' HTTP (probe), their wire and decoded bytes below."""
    usage_wire_bytes: int = 0
    usage_body_bytes: int = 0
    usage_ms: float = 0.0
    """metrics.usage.fetch_usage whole: both queries through the provider, read into a
    UsageTable."""
    workloads: int = 0
    young_pods: int = 0
    refresh_off_ms: float = 0.0
    """Refresher.refresh_once whole with the usage fetch off (herdGuard.estimate request)."""
    usage_error: str = ""
    """Why the usage fetch failed (the service then keeps its last table: none here)."""


@dataclass
class Memory:
    tracemalloc_peak_mb: float
    rss_peak_growth_mb: float
    rss_retained_mb: float


class Bench:
    """One backend at one size: the service's own engine and refresher (build_service,
    no Kubernetes), its provider, and a plain session for the raw HTTP of a query."""

    def __init__(self, url: str, usage: bool = True, timeout: float | None = None) -> None:
        self.url = url
        self.usage = usage
        self.timeout = timeout
        self.settings = settings_for(url, usage=usage, timeout=timeout)
        self.service: Service = build_service(self.settings)
        provider = PrometheusProvider(self.settings.prometheus)
        self.provider = provider
        self.responses = Responses(provider)
        self.session = requests.Session()
        self.probe = Probe(url, self.settings.prometheus.timeout)
        self.metrics = self.settings.fetched_metrics
        self.inventory = NodeInventory()
        self.label = self.settings.prometheus.node_label
        self.usage_error = ""

    def refresh(self) -> dict[str, str]:
        """One refresh; the metrics' errors (the usage fetch's: `usage_error`)."""
        errors = asyncio.run(self.service.refresher.refresh_once())
        self.usage_error = (self.service.engine.snapshot.usage.error or "") if self.usage else ""
        return errors

    @property
    def usage_queries(self) -> list[str]:
        guard = self.settings.herd_guard
        quantile = f"{guard.quantile:g}"
        return [guard.usage_query.replace("{quantile}", quantile), guard.pod_usage_query]

    def usage_phase(self, p: Phases) -> None:
        """The usage fetch alone: the probe's HTTP of both queries, then fetch_usage (a
        failure, e.g. the backend's timeout, is recorded with the time it took)."""
        try:
            for query in self.usage_queries:
                http_ms, _, _, wire, body = self.probe.get(query)
                p.usage_http_ms += http_ms
                p.usage_wire_bytes += wire
                p.usage_body_bytes += body
        except (OSError, RuntimeError) as exc:
            self.probe.close()
            self.probe = Probe(self.url, self.settings.prometheus.timeout)
            p.usage_error = f"probe: {exc}"[:200]
        t0 = time.perf_counter()
        try:
            table = fetch_usage(self.provider, self.settings.herd_guard, time.time())
            p.workloads, p.young_pods = len(table.workloads), len(table.pods)
        except Exception as exc:
            p.usage_error = p.usage_error or describe(exc)
        p.usage_ms = (time.perf_counter() - t0) * 1000
        self.responses.take()

    def phases(self) -> Phases:
        p = Phases()
        results: dict[str, dict[NodeName, float] | BaseException] = {}
        clock = time.perf_counter
        for m in self.metrics:
            http_ms, decode_ms, p.probe_encoding, wire, _ = self.probe.get(m.query)
            p.http_ms += http_ms
            p.decode_ms += decode_ms
            p.wire_bytes += wire
            self.responses.take()
            t0 = clock()
            result = self.provider.query(m.query)
            t1 = clock()
            mapped = map_series(result, self.label, self.inventory)
            t2 = clock()
            p.query_ms += (t1 - t0) * 1000
            p.map_ms += (t2 - t1) * 1000
            p.encoding, body = self.responses.take()
            p.body_bytes += body
            p.series = max(p.series, len(mapped.values))
            results[m.name] = mapped.values
            del result, mapped
        if self.usage:
            self.usage_phase(p)
        engine = self.service.engine
        now = time.time()
        t0 = clock()
        snapshot = next_snapshot(engine.snapshot, results, now)
        t1 = clock()
        # As the refresher builds them: with the herd load and the nodes' sizes (tables
        # without the sizes' room index would be built again by the install).
        herd = engine.guard.projected(snapshot)
        tables = build_tables(self.settings, snapshot, herd, now, engine.sizes)
        t2 = clock()
        engine.install(snapshot, tables, now)
        t3 = clock()
        p.snapshot_ms = (t1 - t0) * 1000
        p.build_ms = (t2 - t1) * 1000
        p.install_ms = (t3 - t2) * 1000
        del snapshot, tables, results
        gc.collect()
        t0 = clock()
        errors = self.refresh()
        p.refresh_ms = (clock() - t0) * 1000
        if errors:
            raise RuntimeError(f"refresh failed: {errors}")
        p.usage_error = p.usage_error or self.usage_error
        return p

    def memory(self) -> Memory:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        self.refresh()
        peak = tracemalloc.get_traced_memory()[1] - before
        tracemalloc.stop()
        gc.collect()
        rss0 = rss_kib()["VmRSS"]
        reset = reset_peak_rss()
        self.refresh()
        after = rss_kib()
        growth = (after["VmHWM"] - rss0) / 1024 if reset else float("nan")
        return Memory(peak / 2**20, growth, (after["VmRSS"] - rss0) / 1024)


@dataclass
class Stalls:
    """What a thread that wants the GIL every 0.5 ms (as the event loop does, between
    requests) waits for while one refresh runs, and the collector's part in it."""

    max_ms: float
    p99_ms: float
    stalled_ms: float
    """Sum of the waits above 1 ms."""
    over_2ms: int
    gc_full: int
    """Full (generation 2) collections during the refresh."""
    gc_full_ms: float
    gc_max_ms: float
    """The longest collection of any generation."""


TICK = 0.0005


def loop_stalls(work: Callable[[], object]) -> Stalls:
    """Run `work` here while a ticker thread sleeps TICK at a time: its oversleep is the
    time it waited for the GIL. Collections are timed through gc.callbacks."""
    waits: list[float] = []
    collections: list[tuple[int, float]] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            collections.append((info["generation"], (time.perf_counter() - started[0]) * 1000))

    done = threading.Event()

    def tick() -> None:
        for _ in range(1_000_000):  # bounded: ~10 minutes of ticks
            if done.is_set():
                return
            t0 = time.perf_counter()
            time.sleep(TICK)
            waits.append((time.perf_counter() - t0 - TICK) * 1000)

    ticker = threading.Thread(target=tick, name="ticker")
    ticker.start()
    time.sleep(0.02)
    waits.clear()
    gc.callbacks.append(on_gc)
    try:
        work()
    finally:
        gc.callbacks.remove(on_gc)
        done.set()
        ticker.join(30)
    waits = sorted(waits) or [0.0]
    full = [ms for gen, ms in collections if gen == 2]
    return Stalls(
        max_ms=waits[-1],
        p99_ms=pct(waits, 99),
        stalled_ms=sum(w for w in waits if w > 1.0),
        over_2ms=sum(1 for w in waits if w > 2.0),
        gc_full=len(full),
        gc_full_ms=sum(full),
        gc_max_ms=max((ms for _, ms in collections), default=0.0),
    )


def stalls_row(backend: str, n: int, bench: Bench, plan: Plan) -> dict[str, Any]:
    """Loop stalls during `plan.reps` refreshes, each measured alone; with the plan's
    switch interval and gc.freeze() after the refresh before each (as the service does
    after an install: extender.metrics.heap)."""
    switch = sys.getswitchinterval()
    if plan.switch_interval is not None:
        sys.setswitchinterval(plan.switch_interval)
    runs = []
    try:
        for _ in range(plan.reps):
            bench.refresh()
            gc.collect()
            gc.freeze()
            runs.append(loop_stalls(bench.refresh))
    finally:
        sys.setswitchinterval(switch)
        gc.unfreeze()
    row: dict[str, Any] = {"backend": backend, "nodes": n}
    for key in ("max_ms", "p99_ms", "stalled_ms", "over_2ms", "gc_full", "gc_full_ms", "gc_max_ms"):
        row[key] = round(median_of(runs, key), 2)
        row[f"{key}_runs"] = [round(float(getattr(r, key)), 2) for r in runs]
    return row


def median_of(rows: Sequence[Any], key: str) -> float:
    return float(statistics.median(float(getattr(r, key)) for r in rows))


def refresh_row(backend: str, n: int, bench: Bench, reps: int) -> dict[str, Any]:
    # The first refresh fills the engine as in a service after its start; its RSS growth
    # is the cold one (later refreshes reuse the memory it took).
    gc.collect()
    rss0 = rss_kib()["VmRSS"]
    reset = reset_peak_rss()
    bench.refresh()
    first = (rss_kib()["VmHWM"] - rss0) / 1024 if reset else float("nan")
    # The same refresh with the usage fetch off (herdGuard.estimate request), interleaved.
    off = Bench(bench.url, usage=False, timeout=bench.timeout)
    off.refresh()
    runs = []
    for _ in range(reps):
        phases = bench.phases()
        gc.collect()
        t0 = time.perf_counter()
        errors = off.refresh()
        phases.refresh_off_ms = (time.perf_counter() - t0) * 1000
        if errors:
            raise RuntimeError(f"refresh failed: {errors}")
        runs.append(phases)
    del off
    memory = [bench.memory() for _ in range(reps)]
    row: dict[str, Any] = {"backend": backend, "nodes": n, "series": runs[-1].series}
    row["workloads"], row["young_pods"] = runs[-1].workloads, runs[-1].young_pods
    row["usage_error"] = next((r.usage_error for r in runs if r.usage_error), "")
    row["encoding"] = runs[-1].encoding if bench.responses.hooked else "?"
    row["probe_encoding"] = runs[-1].probe_encoding
    for key in ("wire_bytes", "body_bytes", "usage_wire_bytes", "usage_body_bytes"):
        row[key] = int(median_of(runs, key))
    row["gzip_ratio"] = (
        round(row["body_bytes"] / row["wire_bytes"], 1) if row["wire_bytes"] else None
    )
    for key in (
        "http_ms",
        "decode_ms",
        "query_ms",
        "map_ms",
        "snapshot_ms",
        "build_ms",
        "install_ms",
        "refresh_ms",
        "usage_http_ms",
        "usage_ms",
        "refresh_off_ms",
    ):
        row[key] = round(median_of(runs, key), 2)
        row[f"{key}_runs"] = [round(getattr(r, key), 2) for r in runs]
    row["share"] = round(row["refresh_ms"] / 1000 / INTERVAL, 4)
    row["share_off"] = round(row["refresh_off_ms"] / 1000 / INTERVAL, 4)
    for key in ("tracemalloc_peak_mb", "rss_peak_growth_mb", "rss_retained_mb"):
        row[key] = round(median_of(memory, key), 1)
    row["rss_first_growth_mb"] = round(first, 1)
    return row


# -- the request path while refreshing -----------------------------------------------------


def refresh_figures(port: int) -> tuple[float, float, float]:
    """(refreshes, seconds in them, failed queries) from the service's own /metrics."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()

    def total(name: str) -> float:
        pattern = rf"^{name}(?:\{{.*\}})? (\S+)$"
        return sum(float(v) for v in re.findall(pattern, text, re.M))

    return (
        total("decice_refresh_duration_seconds_count"),
        total("decice_refresh_duration_seconds_sum"),
        total("decice_refresh_errors_total"),
    )


def prioritize_names(c: Cluster, k: int, seed: int = 28) -> list[str]:
    """Up to k of the nodes our filter passes (seeded), as the scheduler sends them."""
    passing = c.passing
    if len(passing) <= k:
        return passing
    return random.Random(seed).sample(passing, k)


MODES = ("idle", "refreshing", "refreshing_usage", "backend_busy")
"""idle: no refresh after the first (interval 1 h); refreshing: back to back (0.05 s),
the node metrics only (herdGuard.estimate request); refreshing_usage: back to back with
the pods' measured use fetched too (estimate usage, as shipped); shipped (with
--shipped-seconds): every 15 s, as shipped (usage fetched);
backend_busy: no refresh, but another process sends the same two queries to the backend
back to back, so the backend takes the CPU it takes in `refreshing` (on these two shared
cores it competes with the service; in a cluster it runs elsewhere)."""

LAUNCH = """
import gc, runpy, sys
switch, freeze, handover = sys.argv.pop(1), sys.argv.pop(1), sys.argv.pop(1)
if switch != "-":
    sys.setswitchinterval(float(switch))
if freeze == "0":
    from extender.metrics.heap import FrozenHeap
    FrozenHeap.installed = lambda self: None
if handover == "0":
    import extender.metrics.refresher
    extender.metrics.refresher.BUILD_SWITCH_INTERVAL = None
sys.argv[0] = "extender"
runpy.run_module("extender", run_name="__main__")
"""
"""`python -m extender` with what is measured here patched in at start (no file changed):
another GIL switch interval, no gc.freeze() after each install, none while building."""

BUSY = """
import http.client, sys, time, urllib.parse
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conn = http.client.HTTPConnection(host, port, timeout=30)
deadline = time.monotonic() + seconds
for _ in range(100_000):
    if time.monotonic() > deadline:
        break
    for q in sys.argv[4:]:
        qs = urllib.parse.urlencode({"query": q, "timeout": "5s"})
        conn.request("GET", "/api/v1/query?" + qs, headers={"Accept-Encoding": "gzip"})
        conn.getresponse().read()
"""
"""The backend_busy load: the queries back to back, bodies read and dropped (bounded)."""


def service_argv(config: Path, plan: Plan, frozen: bool = True, handover: bool = True) -> list[str]:
    head = [sys.executable, "-m", "extender"]
    if plan.switch_interval is not None or not frozen or not handover:
        switch = "-" if plan.switch_interval is None else f"{plan.switch_interval:g}"
        flags = ["1" if frozen else "0", "1" if handover else "0"]
        head = [sys.executable, "-c", LAUNCH, switch, *flags]
    # Log level error: without Kubernetes the service warns once at start; a failed query
    # is counted in its /metrics instead (checked in request_path).
    return [*head, "serve", "--config", str(config), "--log-level", "error"]


@contextlib.contextmanager
def backend_busy(url: str, queries: Sequence[str], seconds: float) -> Iterator[None]:
    parts = urllib.parse.urlsplit(url)
    argv = [sys.executable, "-c", BUSY, parts.hostname or HOST, str(parts.port), f"{seconds:g}"]
    proc = subprocess.Popen([*argv, *queries], stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        end_process(proc)


def request_path(url: str, mode: str, body: bytes, plan: Plan, work: Path) -> dict[str, Any]:
    """One service, one bounded keep-alive /prioritize loop: p50/p99 server and round trip."""
    port = free_port()
    config = work / f"policy-{port}.json"
    # refreshing*: back to back; shipped*: every 15 s; a suffix says what is patched out.
    shipped = mode.startswith("shipped")
    interval = BACK_TO_BACK if mode.startswith("refreshing") else NO_REFRESH
    interval = INTERVAL if shipped else interval
    usage = mode == "refreshing_usage" or shipped
    raw = policy(url, port, interval, usage=usage, timeout=plan.timeout)
    if "_in_process" in mode:
        raw["prometheus"]["childProcessAbove"] = None
    config.write_bytes(orjson.dumps(raw))  # JSON is YAML
    queries = [m["query"] for m in raw["metrics"]]
    budget = Budget(plan.load_count, plan.load_seconds, 0, 0, 0.0)
    if shipped:
        # Twice the other modes' rate of requests: the time bound is what ends it.
        count = int(2 * plan.load_count / plan.load_seconds * plan.shipped_seconds)
        budget = Budget(count, plan.shipped_seconds, 0, 0, 0.0)
    argv = service_argv(config, plan, frozen="_unfrozen" not in mode, handover="_5ms" not in mode)
    with running(argv, port, "/readyz") as proc:
        busy = (
            backend_busy(url, queries, plan.load_seconds * 5 + 10)
            if mode == "backend_busy"
            else contextlib.nullcontext()
        )
        with busy:
            first = refresh_figures(port)
            loop = client_loop(port, "/prioritize", body, budget)
            last = refresh_figures(port)
        measured = measured_use(port)
        rss = rss_kib(proc.pid)
    if not orjson.loads(loop.answer):
        raise RuntimeError("prioritize answered no host")
    if last[2]:
        raise RuntimeError(f"{last[2]:.0f} failed queries in the service's refreshes")
    refreshes = last[0] - first[0]
    return {
        "server_p50_ms": pct(loop.server_ms, 50),
        "server_p99_ms": pct(loop.server_ms, 99),
        "rtt_p50_ms": pct(loop.rtt_ms, 50),
        "rtt_p99_ms": pct(loop.rtt_ms, 99),
        "requests": len(loop.rtt_ms),
        "refreshes": refreshes,
        "refresh_mean_ms": (last[1] - first[1]) / refreshes * 1000 if refreshes > 0 else 0.0,
        "service_rss_mb": rss["VmRSS"] / 1024,
        "service_hwm_mb": rss["VmHWM"] / 1024,
        "young_pods": float(measured.get("youngPods") or 0),
        "usage_error": str(measured.get("error") or ""),
    }


def measured_use(port: int) -> dict[str, Any]:
    """The service's /readyz herdGuard.measuredUse (empty when the fetch is off)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    conn.request("GET", "/readyz")
    doc = orjson.loads(conn.getresponse().read())
    conn.close()
    found: dict[str, Any] = (doc.get("herdGuard") or {}).get("measuredUse") or {}
    return found


LOAD_KEYS = ("server_p50_ms", "server_p99_ms", "rtt_p50_ms", "rtt_p99_ms")


LOAD_REFRESHES = 3


def spanning(plan: Plan, refresh_seconds: float) -> Plan:
    """The plan with every mode's load long enough for LOAD_REFRESHES refreshes of
    `refresh_seconds` (its count scaled with it: the time bound ends the run)."""
    seconds = max(plan.load_seconds, LOAD_REFRESHES * refresh_seconds)
    count = int(plan.load_count * seconds / plan.load_seconds)
    return dataclasses.replace(plan, load_seconds=seconds, load_count=count)


def load_rows(
    backend: str, n: int, url: str, c: Cluster, plan: Plan, work: Path
) -> list[dict[str, Any]]:
    """Rounds of every mode, the order rotating from round to round; one row per mode,
    medians of its runs, ratios against idle."""
    names = prioritize_names(c, plan.names)
    body = request_body(names, "names")
    modes = (*MODES, "shipped") if plan.shipped_seconds > 0 else MODES
    if plan.unfrozen:
        modes = (*modes, "refreshing_unfrozen")
    if plan.in_process:
        modes = (*modes, "refreshing_in_process")
        if plan.shipped_seconds > 0:
            modes = (*modes, "shipped_in_process")
    if plan.no_handover:
        modes = (*modes, "refreshing_5ms")
        if plan.in_process:  # neither: the code before both
            modes = (*modes, "refreshing_in_process_5ms")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for r in range(plan.reps):
        for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
            runs[mode].append(request_path(url, mode, body, plan, work))
    rows = []
    for mode, results in runs.items():
        row: dict[str, Any] = {"backend": backend, "nodes": n, "names": len(names), "mode": mode}
        for key in (*LOAD_KEYS, "requests", "refreshes", "refresh_mean_ms", "service_hwm_mb"):
            row[key] = round(statistics.median(x[key] for x in results), 3)
        row["young_pods"] = min(x["young_pods"] for x in results)
        row["usage_error"] = next((x["usage_error"] for x in results if x["usage_error"]), "")
        row["runs"] = results
        rows.append(row)
    idle = rows[0]
    for row in rows:
        for key in LOAD_KEYS:
            row[f"x_{key}"] = round(row[key] / idle[key], 2) if idle[key] else None
    # The usage fetch's own effect: refreshing with it against refreshing without it.
    plain = next(r for r in rows if r["mode"] == "refreshing")
    for row in rows:
        if row["mode"] == "refreshing_usage":
            for key in ("server_p99_ms", "rtt_p99_ms"):
                row[f"u_{key}"] = round(row[key] / plain[key], 2) if plain[key] else None
    return rows


# -- where the time goes -------------------------------------------------------------------


def top_functions(profile: cProfile.Profile, top: int) -> list[str]:
    """The `top` functions by own time: own ms, cumulative ms, calls, where."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (path, line, name), (_, calls, own, cum, _) in entries.items():
        rows.append((own, cum, calls, f"{short(path)}:{line}({name})"))
    rows.sort(reverse=True)
    return [
        f"{own * 1000:9.1f} {cum * 1000:9.1f} {calls:8d}  {where}"
        for own, cum, calls, where in rows[:top]
    ]


def short(path: str) -> str:
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path if path.startswith("~") else Path(path).name


def profiled(f: Callable[[], Any]) -> tuple[Any, cProfile.Profile]:
    profile = cProfile.Profile()
    profile.enable()
    try:
        out = f()
    finally:
        profile.disable()
    return out, profile


def profile_phases(bench: Bench, top: int) -> dict[str, list[str]]:
    """cProfile of each phase of one refresh, run in this thread one after the other."""
    out: dict[str, list[str]] = {}
    results: dict[str, dict[NodeName, float] | BaseException] = {}
    query_profile = cProfile.Profile()
    map_profile = cProfile.Profile()
    for m in bench.metrics:
        query_profile.enable()
        result = bench.provider.query(m.query)
        query_profile.disable()
        map_profile.enable()
        results[m.name] = map_series(result, bench.label, bench.inventory).values
        map_profile.disable()
    bench.responses.take()
    out["query (HTTP + decode), both metrics"] = top_functions(query_profile, top)
    out["map_series, both metrics"] = top_functions(map_profile, top)
    engine = bench.service.engine
    now = time.time()
    snapshot, prof = profiled(lambda: next_snapshot(engine.snapshot, results, now))
    tables, prof = profiled(lambda: build_tables(bench.settings, snapshot, {}, now))
    out["build_tables"] = top_functions(prof, top)
    _, prof = profiled(lambda: engine.install(snapshot, tables, now))
    out["Engine.install (on the loop)"] = top_functions(prof, top)
    if bench.usage:
        guard = bench.settings.herd_guard
        title = "fetch_usage (both usage queries, HTTP + decode + read)"
        try:
            _, prof = profiled(lambda: fetch_usage(bench.provider, guard, time.time()))
            out[title] = top_functions(prof, top)
        except Exception as exc:
            out[title] = [f"failed: {describe(exc)}"]
        bench.responses.take()
    return out


def backend_eval_ms(url: str, bench: Bench, queries: Sequence[str] = ()) -> float | None:
    """Prometheus' own evaluation time of `queries` (default: both metrics') (`stats=all`),
    None elsewhere."""
    total = 0.0
    for query in queries or [m.query for m in bench.metrics]:
        params = {"query": query, "stats": "all"}
        payload = bench.session.get(f"{url}/api/v1/query", params=params, timeout=30).json()
        timings = (payload.get("data", {}).get("stats") or {}).get("timings")
        if not timings:
            return None
        total += float(timings["execTotalTime"]) * 1000
    return round(total, 2)


# -- output --------------------------------------------------------------------------------

PHASE_COLUMNS = (
    ("backend", "backend", "{}", 15),
    ("nodes", "nodes", "{}", 6),
    ("series", "series", "{}", 6),
    ("encoding", "enc", "{}", 5),
    ("wire_bytes", "wire KB", "{:.0f}", 8),
    ("body_bytes", "body KB", "{:.0f}", 8),
    ("gzip_ratio", "x", "{:.1f}", 5),
    ("http_ms", "http", "{:.1f}", 7),
    ("decode_ms", "decode", "{:.1f}", 7),
    ("query_ms", "query", "{:.1f}", 7),
    ("map_ms", "map", "{:.1f}", 7),
    ("snapshot_ms", "snap", "{:.1f}", 6),
    ("build_ms", "build", "{:.1f}", 7),
    ("install_ms", "install", "{:.1f}", 7),
    ("refresh_ms", "refresh", "{:.1f}", 8),
    ("share", "share", "{:.1%}", 6),
    ("tracemalloc_peak_mb", "tm MB", "{:.1f}", 6),
    ("rss_peak_growth_mb", "rss+ MB", "{:.1f}", 7),
    ("rss_first_growth_mb", "1st MB", "{:.1f}", 7),
)
USAGE_COLUMNS = (
    ("backend", "backend", "{}", 15),
    ("nodes", "nodes", "{}", 6),
    ("pods", "pods", "{}", 7),
    ("workloads", "wklds", "{}", 6),
    ("young_pods", "young", "{}", 7),
    ("usage_wire_bytes", "wire KB", "{:.0f}", 8),
    ("usage_body_bytes", "body KB", "{:.0f}", 8),
    ("usage_http_ms", "http", "{:.1f}", 8),
    ("usage_ms", "fetch", "{:.1f}", 8),
    ("refresh_off_ms", "refr off", "{:.1f}", 9),
    ("refresh_ms", "refr on", "{:.1f}", 9),
    ("share_off", "shr off", "{:.1%}", 7),
    ("share", "shr on", "{:.1%}", 7),
)
STALL_COLUMNS = (
    ("backend", "backend", "{}", 15),
    ("nodes", "nodes", "{}", 6),
    ("max_ms", "max ms", "{:.2f}", 8),
    ("p99_ms", "p99 ms", "{:.2f}", 8),
    ("stalled_ms", "sum>1ms", "{:.1f}", 8),
    ("over_2ms", ">2ms", "{:.0f}", 5),
    ("gc_full", "gc2", "{:.0f}", 4),
    ("gc_full_ms", "gc2 ms", "{:.1f}", 7),
    ("gc_max_ms", "gcmax ms", "{:.1f}", 8),
)
LOAD_COLUMNS = (
    ("backend", "backend", "{}", 15),
    ("nodes", "nodes", "{}", 6),
    ("names", "names", "{}", 6),
    ("mode", "mode", "{}", 16),
    ("server_p50_ms", "srv p50", "{:.3f}", 8),
    ("server_p99_ms", "srv p99", "{:.3f}", 8),
    ("rtt_p50_ms", "rtt p50", "{:.3f}", 8),
    ("rtt_p99_ms", "rtt p99", "{:.3f}", 8),
    ("x_server_p50_ms", "x srv50", "{:.2f}", 7),
    ("x_server_p99_ms", "x srv99", "{:.2f}", 7),
    ("x_rtt_p50_ms", "x rtt50", "{:.2f}", 7),
    ("x_rtt_p99_ms", "x rtt99", "{:.2f}", 7),
    ("u_server_p99_ms", "u srv99", "{:.2f}", 7),
    ("u_rtt_p99_ms", "u rtt99", "{:.2f}", 7),
    ("requests", "reqs", "{:.0f}", 5),
    ("refreshes", "refr", "{:.0f}", 5),
    ("refresh_mean_ms", "refr ms", "{:.0f}", 7),
    ("service_hwm_mb", "hwm MB", "{:.0f}", 6),
)


def table(columns: Sequence[tuple[str, str, str, int]], rows: Sequence[dict[str, Any]]) -> str:
    def cell(row: dict[str, Any], key: str, fmt: str) -> str:
        value = row.get(key)
        if value is None:
            return "-"
        if key in ("wire_bytes", "body_bytes", "usage_wire_bytes", "usage_body_bytes"):
            value = value / 1024
        return fmt.format(value)

    lines = [" ".join(title.rjust(w) for _, title, _, w in columns)]
    lines += [" ".join(cell(r, k, f).rjust(w) for k, _, f, w in columns) for r in rows]
    return "\n".join(lines)


def verdicts(phases: Sequence[dict[str, Any]], loads: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for row in [*phases, *loads]:
        if row.get("usage_error"):
            where = f"({row['mode']})" if "mode" in row else "(one refresh)"
            out.append(
                f"{row['backend']} {row['nodes']}: the usage fetch FAILED {where}: "
                f"{row['usage_error']}"
            )
    for row in phases:
        if {row["encoding"], row["probe_encoding"]} != {"gzip"}:
            out.append(
                f"{row['backend']} {row['nodes']}: answers NOT gzip-encoded (provider "
                f"{row['encoding']}, probe {row['probe_encoding']})"
            )
        if row["nodes"] >= 15000:
            met = "met" if row["share"] < SHARE_TARGET else "MISSED"
            out.append(
                f"{row['backend']} {row['nodes']}: refresh {row['refresh_ms']:.0f} ms = "
                f"{row['share']:.1%} of {INTERVAL:g} s (target < {SHARE_TARGET:.0%}): {met}"
            )
    for row in loads:
        if not row["mode"].startswith(("refreshing", "shipped")):
            continue
        for key in ("x_server_p99_ms", "x_rtt_p99_ms"):
            value = row.get(key)
            if value is not None:
                met = "met" if value <= P99_TARGET else "MISSED"
                out.append(
                    f"{row['backend']} {row['nodes']}: prioritize {key[2:-3]} {row['mode']} / idle "
                    f"{value:.2f}x (target <= {P99_TARGET}x): {met}"
                )
        for key in ("u_server_p99_ms", "u_rtt_p99_ms"):
            value = row.get(key)
            if value is not None:
                met = "met" if value <= P99_TARGET else "MISSED"
                out.append(
                    f"{row['backend']} {row['nodes']}: prioritize {key[2:-3]} refreshing with "
                    f"the usage fetch / without {value:.2f}x (target <= {P99_TARGET}x): {met}"
                )
    return out


# -- the run -------------------------------------------------------------------------------


def run(
    sizes: Sequence[int],
    backends: Sequence[str],
    plan: Plan,
    load: bool,
    profile: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    phases: list[dict[str, Any]] = []
    stalls: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    profiles: dict[str, dict[str, list[str]]] = {}
    evals: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory(prefix="decice-refreshscale-") as tmp:
        for n in sizes:
            c = cluster(n)
            f = fleet(c, plan.pods)
            for backend in backends:
                work = Path(tmp) / f"{backend}-{n}"
                work.mkdir()
                started = time.monotonic()
                with BACKEND_STARTERS[backend](c, f, work) as url:
                    loaded = time.monotonic() - started
                    log(f"-- {backend}, {n} nodes, {len(f)} pods: loaded in {loaded:.1f} s")
                    bench = Bench(url, timeout=plan.timeout)
                    row = refresh_row(backend, n, bench, plan.reps)
                    row["pods"] = len(f)
                    phases.append(row)
                    log(table(PHASE_COLUMNS, [row]).splitlines()[1])
                    log("   usage  " + table(USAGE_COLUMNS, [row]).splitlines()[1])
                    stalls.append(stalls_row(backend, n, bench, plan))
                    log("   stalls " + table(STALL_COLUMNS, stalls[-1:]).splitlines()[1])
                    if profile and n == max(sizes):
                        profiles[f"{backend} {n}"] = profile_phases(bench, plan.profile_top)
                        evals[f"{backend} {n}"] = backend_eval_ms(url, bench)
                        evals[f"{backend} {n} usage"] = backend_eval_ms(
                            url, bench, bench.usage_queries
                        )
                    del bench
                    gc.collect()
                    if load:
                        # Each run spans LOAD_REFRESHES refreshes with the usage fetch at
                        # least, else a slow one (100,000 pods) never completes within it.
                        long = spanning(plan, row["refresh_ms"] / 1000)
                        rows = load_rows(backend, n, url, c, long, work)
                        loads += rows
                        for line in table(LOAD_COLUMNS, rows).splitlines()[1:]:
                            log(line)
                shutil.rmtree(work, ignore_errors=True)
    return {
        "phases": phases,
        "stalls": stalls,
        "loads": loads,
        "profiles": profiles,
        "backend_eval_ms": evals,
    }


def report(data: dict[str, Any]) -> str:
    out = [
        f"\nOne refresh of both metrics, medians of {data['reps']} (ms; share of the "
        f"{INTERVAL:g} s interval; memory: tracemalloc peak, peak RSS growth)",
        table(PHASE_COLUMNS, data["phases"]),
        "\nThe pods' measured use (herdGuard.estimate usage): the two usage queries' answers "
        "(workloads, young pods, bytes, HTTP), fetch_usage whole, and one refresh without "
        f"and with the fetch (medians of {data['reps']}, ms; share of the {INTERVAL:g} s "
        "interval)",
        table(USAGE_COLUMNS, data["phases"]),
    ]
    out += [
        f"\nWhat the event loop would wait for the GIL during one refresh ({data['variant']}): "
        f"a thread sleeping {TICK * 1000:g} ms at a time, its oversleep; full collections "
        f"(gc2) and the longest of any generation; medians of {data['reps']}",
        table(STALL_COLUMNS, data["stalls"]),
    ]
    if data["loads"]:
        out += [
            f"\n/prioritize ({data['variant']}): idle (no refresh), refreshing (back "
            f"to back, node metrics only), refreshing_usage (back to back, the usage fetch "
            f"too), backend_busy (no refresh, the backend queried back to back), shipped "
            f"(every 15 s, when asked); medians of {data['reps']} interleaved runs (ms), "
            f"x = against idle, u = refreshing_usage against refreshing",
            table(LOAD_COLUMNS, data["loads"]),
        ]
    for name, phases in data["profiles"].items():
        evaluated = data["backend_eval_ms"].get(name)
        usage = data["backend_eval_ms"].get(f"{name} usage")
        if evaluated is not None:
            out.append(
                f"\nprofile {name}: the backend's own evaluation {evaluated:.1f} ms"
                + (f" (the usage queries: {usage:.1f} ms)" if usage is not None else "")
            )
        else:
            out.append(f"\nprofile {name}")
        for phase, lines in phases.items():
            out.append(f"  {phase}: own ms, cumulative ms, calls")
            out += [f"    {line}" for line in lines]
    out.append("")
    out += verdicts(data["phases"], data["loads"])
    return "\n".join(out)


def variant(plan: Plan) -> str:
    switch = 5.0 if plan.switch_interval is None else plan.switch_interval * 1000
    return f"GIL switch interval {switch:g} ms, gc.freeze() after install" + (
        " (and a service without it: refreshing_unfrozen)" if plan.unfrozen else ""
    )


def main(argv: Sequence[str] | None = None) -> int:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(prog="refreshscale", description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="50 nodes, one repetition, short loads")
    p.add_argument("--sizes", help="comma-separated node counts (default 5000,15000)")
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"{','.join(BACKEND_STARTERS)} (default {','.join(BACKENDS)}); recorded: "
        "Prometheus' answers served by a process that evaluates nothing",
    )
    p.add_argument("--reps", type=int, help="repetitions (default 3; --quick 1)")
    p.add_argument(
        "--switch-interval",
        type=float,
        metavar="S",
        help="start the service with sys.setswitchinterval(S) (default: Python's 0.005)",
    )
    p.add_argument(
        "--unfrozen",
        action="store_true",
        help="add a mode refreshing back to back in a service whose heap freezing after "
        "each install is patched out (the A/B of extender.metrics.heap)",
    )
    p.add_argument(
        "--no-handover",
        action="store_true",
        help="add a mode refreshing back to back with Python's 5 ms switch interval while "
        "the tables are built (the A/B of the refresher's shorter one)",
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="add a mode refreshing back to back with every answer decoded in the service's "
        "interpreter (prometheus.childProcessAbove null): the A/B of the child process",
    )
    p.add_argument(
        "--shipped-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="add a mode refreshing every 15 s (as shipped), its load S seconds long",
    )
    p.add_argument(
        "--pods",
        type=int,
        help="pods whose use the usage queries read (default 100000; --quick 1000)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="prometheus.timeout of the service and the probes (default: the pack's 5 s)",
    )
    p.add_argument("--no-load", action="store_true", help="skip the request-path runs")
    p.add_argument("--no-profile", action="store_true", help="skip the profile")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = p.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.reps is not None:
        plan = dataclasses.replace(plan, reps=args.reps)
    if args.pods is not None:
        plan = dataclasses.replace(plan, pods=args.pods)
    if args.timeout is not None:
        plan = dataclasses.replace(plan, timeout=args.timeout)
    if args.switch_interval is not None:
        plan = dataclasses.replace(plan, switch_interval=args.switch_interval)
    if args.unfrozen:
        plan = dataclasses.replace(plan, unfrozen=True)
    if args.in_process:
        plan = dataclasses.replace(plan, in_process=True)
    if args.no_handover:
        plan = dataclasses.replace(plan, no_handover=True)
    if args.shipped_seconds > 0:
        plan = dataclasses.replace(plan, shipped_seconds=args.shipped_seconds)
    default = [50] if args.quick else [5000, 15000]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else default
    backends = [b for b in args.backends.split(",") if b]
    if set(backends) - set(BACKEND_STARTERS):
        p.error(f"--backends: choose from {', '.join(BACKEND_STARTERS)}")
    started = time.monotonic()
    print(f"machine: {os.cpu_count()} cpus; python {sys.version.split()[0]}; policy {PACK.name}")
    print(table(PHASE_COLUMNS, []), flush=True)
    data = run(
        sizes,
        backends,
        plan,
        not args.no_load,
        not args.no_profile,
        lambda line: print(line, flush=True),
    )
    data["reps"] = plan.reps
    data["variant"] = variant(plan)
    data["seconds"] = round(time.monotonic() - started, 1)
    print(report(data))
    print(f"total {data['seconds']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
