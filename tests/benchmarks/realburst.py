"""What a real kube-scheduler pays for our extender during a burst of pods.

    python -m tests.benchmarks.realburst [--quick] [--nodes 1000] [--pods 1000] [--runs 3]
        [--json FILE] [--variants ours-bind,ours-nobind,donothing] [--workdir DIR]
        [--max-hosts K] [--shortlist NODES[,SHARE]]

A real control plane (tests/harness/controlplane.py: etcd, kube-apiserver v1.36.2,
kube-scheduler v1.35.4, all on 127.0.0.1), N fake nodes (node-1..node-N, 4 or 8 cores,
110 pods each) made once, an unrecorded warm-up burst of `WARMUP_PODS` pods per variant
(`Bench.warm_up`: a cold API server made the first burst the scheduler bound 5x slower per
attempt), then for each run of each variant, interleaved (A 1, B 1, C 1, A 2, ...):

1. the variant's extender starts (fresh process); kube-scheduler is not running;
2. a fresh namespace and P pods (`pod_manifest`: one container, 100m CPU, 64Mi, the
   scheduler name decice_sched) are created while no scheduler runs, so the queue is
   full when scheduling begins ("from a full queue");
3. we wait until the cluster is quiet (etcd, kube-apiserver and the extender together
   below `QUIET_CORES` of CPU over a `QUIET_WINDOW` s window), then a fresh
   kube-scheduler starts on the variant's KubeSchedulerConfiguration: what
   `decice-extender scheduler-config --full` prints (leader election on our Lease,
   `percentageOfNodesToScore: 100`), client QPS `SCHEDULER_QPS` (burst 2x) so binds are
   never throttled;
4. a watch on the namespace's pods (in this process, on its own thread) timestamps each
   pod's first event with `spec.nodeName`; the burst ends when all P are bound;
5. the scheduler's /metrics are read. The scheduler process is new, so every counter and
   histogram holds exactly this burst (the delta over the burst; nothing else runs under
   the profile decice_sched). The queue must be empty (`scheduler_pending_pods` 0);
6. the scheduler and the extender stop (SIGTERM), the namespace's pods are deleted.

Variants:

- `ours-bind`: `decice-extender serve` on a static 2-metric policy (`policy`): cpu weight
  2 with a 0.9 filter threshold, memory weight 1, herd guard on, Events on (as shipped:
  5 a second, 100 queued), bind on; the extenders entry our CLI prints (filter,
  prioritize, preempt, bindVerb), the shipped `prioritize.shortlist` (the filter passes
  our best 200 nodes, or a fifth of those that pass when that is more, so the scheduler
  scores 200 at 1,000 nodes and 1,000 at 5,000);
- `ours-all` (only when asked for): ours-bind with `prioritize.shortlist: null`, every
  passing node to the scheduler (as before the shortlist);
- `ours-before` (only when asked for, with `--before-tree DIR`): ours-bind run from an
  older `extender` package (`git archive OLD extender | tar -x -C DIR`), so a change is
  measured against its parent interleaved in one sitting;
- `ours-nobind`: the same with `bind.enabled: false` (the CLI leaves bindVerb out; the
  scheduler binds);
- `donothing`: tests/benchmarks/donothing.py (starlette + orjson, uvicorn as we serve:
  one worker, uvloop, httptools, no access log): every node passes, every score 0, no
  bind verb; the extenders entry is ours-nobind's with its port;
- `donothing-bind` (only when asked for): the do-nothing extender with a bind verb that
  posts the Binding through our Kubernetes client and does nothing else; the extenders
  entry is ours-bind's with its port: the floor of an extender in Python that binds;
- `none` (only when asked for): the same KubeSchedulerConfiguration with no extender, the
  scheduler's own floor.

Per run (`RUN_KEYS`), from the scheduler's /metrics (saved as
scheduler-metrics-VARIANT-RUN.txt in the work dir):

- `algorithm_ms_per_attempt`: `scheduler_scheduling_algorithm_duration_seconds` sum /
  count: filter, score and the extender calls; binding runs apart, in its own goroutine.
  p50/p99 are interpolated linearly inside the histogram's buckets, as Prometheus'
  histogram_quantile does; the buckets double from 1 ms, so they are coarse;
- `framework_ms_per_attempt`: the PreFilter + Filter + PreScore + Score extension points
  (`scheduler_framework_extension_point_duration_seconds`: the in-tree plugins only, no
  extender), so `algorithm - framework` is mostly the extender calls;
- `attempt_ms_mean`, p50/p99: `scheduler_scheduling_attempt_duration_seconds`, from the pop
  of the pod to the end of its bind (binding, with every other bind in flight, included:
  noisy);
- `sli_p50_ms`/`sli_p99_ms`: `scheduler_pod_scheduling_sli_duration_seconds`, from entering
  the queue to bound (the wait in the full queue included; its buckets double from 10 ms,
  so a p99 interpolated in (5.12, 10.24] s can exceed `wall_s`);
- `attempts`: `scheduler_schedule_attempts_total`, every result;
  `scheduler_e2e_scheduling_duration_seconds` is reported when the scheduler has it (v1.35
  does not).

And from this process: `wall_s`, from launching kube-scheduler to the last pod seen bound
(its start-up included: `startup_s` is when it answered /readyz and held its Lease,
`first_bound_s` the first bind, both ~0.2 s); `cpu_s`, CPU seconds (utime + stime, from
/proc) of each process over the burst: the scheduler's whole life (it started with the
burst), the others' from the launch to the last bind; `pods_bound` and the placement
(`max_pods_per_node`, `nodes_used`) from the API server.

Printed: a table of medians (min-max) per variant, and the ratios ours-bind / donothing
and ours-nobind / donothing (ratio of the medians; in brackets the min-max of the ratios
of run i to run i, interleaved neighbours). Every loop is bounded in count and time: a
stuck run fails naming the processes' log files (the work dir is kept), never hangs.
A full run (1,000 nodes, 1,000 pods, 3 runs of 3 variants) takes about 2 minutes on the
shared 2-core machine; `--quick` (50 nodes, 50 pods, 1 run each: about 20 s) is what
tests/benchmarks/test_realburst_quick.py runs.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.benchmarks.bench import cpu_model
from tests.benchmarks.burst import cpu_with_children
from tests.harness.controlplane import (
    ADMIN_USER,
    EXTENDER_USER,
    SCHEDULER_NAME,
    ControlPlane,
    FakeNode,
    Process,
    fake_nodes,
    metric_samples,
    metric_value,
    pod_manifest,
)
from tests.harness.loopback import LOCALHOST, free_port

JSON = dict[str, Any]
Shortlist = JSON | str | None
"""prioritize.shortlist for our variants: the rule, `OFF` (null), or None (the shipped)."""
Log = Callable[[str], None]

HERE = Path(__file__).resolve().parent
DONOTHING = HERE / "donothing.py"

VARIANTS = ("ours-bind", "ours-nobind", "donothing")
ALL_VARIANTS = (*VARIANTS, "ours-all", "ours-before", "donothing-bind", "none")
BASELINE = "donothing"

SEED = 42
SCHEDULER_QPS = 1000.0
#: The cluster is quiet when etcd + kube-apiserver + the extender use less than this many
#: cores together over one window.
QUIET_CORES = 0.10
QUIET_WINDOW = 1.0
QUIET_TIMEOUT = 90.0
#: Ceilings (seconds) of the waits; a stuck run fails, never hangs.
BURST_TIMEOUT = 600.0
QUICK_BURST_TIMEOUT = 180.0
SETTLE_TIMEOUT = 30.0
WATCH_READ_TIMEOUT = 2.0
#: Pods of the unrecorded warm-up burst of each variant (at most --pods).
WARMUP_PODS = 50


@dataclass(frozen=True)
class Sizes:
    nodes: int
    pods: int
    runs: int


FULL = Sizes(nodes=1000, pods=1000, runs=3)
QUICK = Sizes(nodes=50, pods=50, runs=1)

#: Keys of every run's row in the JSON (`runs`).
RUN_KEYS = (
    "variant",
    "run",
    "nodes",
    "pods",
    "pods_bound",
    "bound_seen",
    "attempts",
    "attempts_by_result",
    "algorithm_count",
    "algorithm_ms_per_attempt",
    "algorithm_p50_ms",
    "algorithm_p99_ms",
    "framework_ms_per_attempt",
    "attempt_ms_mean",
    "attempt_p50_ms",
    "attempt_p99_ms",
    "e2e_ms_mean",
    "sli_p50_ms",
    "sli_p99_ms",
    "pending_after",
    "wall_s",
    "startup_s",
    "first_bound_s",
    "cpu_s",
    "max_pods_per_node",
    "nodes_used",
    "extender_requests",
    "quiet_wait_s",
    "loadavg_1m",
)
#: Keys of each variant's summary (`summary[variant]`): each a {median, min, max}.
SUMMARY_KEYS = (
    "algorithm_ms_per_attempt",
    "algorithm_p50_ms",
    "algorithm_p99_ms",
    "framework_ms_per_attempt",
    "attempt_ms_mean",
    "attempt_p99_ms",
    "sli_p99_ms",
    "wall_s",
    "pods_bound",
    "attempts",
    "scheduler_cpu_s",
    "extender_cpu_s",
)
#: Metrics whose ratio to the baseline is reported (`ratios[variant][metric]`).
RATIO_KEYS = ("algorithm_ms_per_attempt", "attempt_ms_mean", "wall_s", "scheduler_cpu_s")


class RunFailed(RuntimeError):
    """A run did not finish; the message names the log files."""


# -- the policy and the scheduler configs -----------------------------------------------------


def policy(
    nodes: Sequence[FakeNode],
    bind: bool,
    max_hosts: int | None = None,
    shortlist: Shortlist = None,
) -> JSON:
    """The static 2-metric policy: cpu (weight 2, filtered above 0.9) and memory (weight
    1), lower is better, herd guard on the cpu, Events on (the defaults), bind on or off.

    Every node starts below 0.85 cpu, so the filter rejects none at first (the scheduler
    scores as many nodes as under the do-nothing extender); the herd guard adds each placed
    pod's request (100m: 0.025 of a 4-core node), so a node can cross 0.9 during the burst.
    The static snapshot is never refreshed (interval and maxAge 3600 s, as the e2e
    harness's `static_policy`): the reservations hold for the whole burst. `max_hosts`
    sets prioritize.maxHosts (`--max-hosts`); `shortlist` prioritize.shortlist (`--shortlist`:
    None keeps the shipped rule, `OFF` sets null: every passing node to the scheduler)."""
    rng = random.Random(SEED)
    values = {
        n.name: {
            "cpu": round(rng.uniform(0.05, 0.85), 4),
            "memory": round(rng.uniform(0.1, 0.9), 4),
        }
        for n in nodes
    }
    return {
        "schedulerNames": [SCHEDULER_NAME],
        "provider": "static",
        "static": {"nodes": values},
        "prometheus": {"interval": 3600},
        "metrics": [
            {
                "name": "cpu",
                "weight": 2,
                "direction": "lower",
                "filter": {"above": 0.9},
                "maxAge": 3600,
            },
            {"name": "memory", "weight": 1, "direction": "lower", "maxAge": 3600},
        ],
        "herdGuard": {"enabled": True, "metric": "cpu"},
        "bind": {"enabled": bind},
        "prioritize": {
            "maxHosts": max_hosts,
            **({} if shortlist is None else {"shortlist": None if shortlist == OFF else shortlist}),
        },
    }


def our_policies(
    nodes: Sequence[FakeNode], max_hosts: int | None, shortlist: Shortlist = None
) -> dict[str, JSON]:
    """The policy of each of our variants."""
    return {
        "ours-bind": policy(nodes, True, max_hosts, shortlist),
        "ours-before": policy(nodes, True, max_hosts, shortlist),
        "ours-all": policy(nodes, True, max_hosts, OFF),
        "ours-nobind": policy(nodes, False, max_hosts, shortlist),
    }


def scheduler_configs(
    cp: ControlPlane, work: Path, policies: Mapping[str, JSON], percentage: int = 100
) -> dict[str, JSON]:
    """Each variant's KubeSchedulerConfiguration: what our CLI prints for its policy (port
    1, replaced when the scheduler starts), QPS `SCHEDULER_QPS`, every node scored
    (`percentage` 100; 0: the scheduler's own default, the field unset)."""
    configs: dict[str, JSON] = {}
    for variant, ours in policies.items():
        path = work / f"policy-{variant}.yaml"
        path.write_bytes(orjson.dumps(ours))  # JSON is YAML
        configs[variant] = cp.decice_scheduler_config(
            path, 1, percentage_of_nodes_to_score=percentage or None, qps=SCHEDULER_QPS
        )
        if not percentage:
            configs[variant].pop("percentageOfNodesToScore", None)
    donothing = copy.deepcopy(configs["ours-nobind"])
    donothing_bind = copy.deepcopy(configs["ours-bind"])
    none = copy.deepcopy(configs["ours-nobind"])
    del none["extenders"]
    configs.update(donothing=donothing, none=none)
    configs["donothing-bind"] = donothing_bind
    if "bindVerb" not in configs["ours-bind"]["extenders"][0]:
        raise RunFailed("scheduler-config printed no bindVerb for a policy with bind on")
    if "bindVerb" in configs["donothing"]["extenders"][0]:
        raise RunFailed("scheduler-config printed a bindVerb for a policy with bind off")
    return configs


# -- reading the scheduler's /metrics ---------------------------------------------------------


@dataclass(frozen=True)
class Histogram:
    """One histogram (every series matching some labels, summed)."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending le
    total: float
    count: float

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """Linear interpolation inside the bucket holding rank q*count (Prometheus'
        histogram_quantile); the highest finite bound when it falls in +Inf."""
        if not self.count or not self.buckets:
            return None
        rank = q * self.buckets[-1][1]
        lower, below = 0.0, 0.0
        for le, cumulative in self.buckets:
            if cumulative >= rank:
                if le == float("inf"):
                    return lower
                if cumulative == below:
                    return le
                return lower + (le - lower) * (rank - below) / (cumulative - below)
            lower, below = le, cumulative
        return lower


def histogram(text: str, name: str, labels: Mapping[str, str] | None = None) -> Histogram:
    want = dict(labels or {}).items()
    cumulative: dict[float, float] = {}
    for got, value in metric_samples(text, f"{name}_bucket"):
        if want <= got.items():
            le = float(got["le"])
            cumulative[le] = cumulative.get(le, 0.0) + value
    return Histogram(
        buckets=tuple(sorted(cumulative.items())),
        total=metric_value(text, f"{name}_sum", labels),
        count=metric_value(text, f"{name}_count", labels),
    )


def has_metric(text: str, name: str) -> bool:
    return any(True for _ in metric_samples(text, name))


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


FRAMEWORK_POINTS = ("PreFilter", "Filter", "PreScore", "Score")


def scheduler_numbers(text: str) -> JSON:
    """The run's numbers from the scheduler's /metrics text (a fresh process: the burst)."""
    algorithm = histogram(text, "scheduler_scheduling_algorithm_duration_seconds")
    attempt = histogram(text, "scheduler_scheduling_attempt_duration_seconds")
    sli = histogram(text, "scheduler_pod_scheduling_sli_duration_seconds")
    framework = sum(
        metric_value(
            text,
            "scheduler_framework_extension_point_duration_seconds_sum",
            {"extension_point": point},
        )
        for point in FRAMEWORK_POINTS
    )
    by_result: Counter[str] = Counter()
    for labels, value in metric_samples(text, "scheduler_schedule_attempts_total"):
        by_result[labels.get("result", "")] += int(value)
    e2e_name = "scheduler_e2e_scheduling_duration_seconds"
    e2e = histogram(text, e2e_name) if has_metric(text, f"{e2e_name}_count") else None
    return {
        "attempts": sum(by_result.values()),
        "attempts_by_result": dict(sorted(by_result.items())),
        "algorithm_count": int(algorithm.count),
        "algorithm_ms_per_attempt": ms(algorithm.mean),
        "algorithm_p50_ms": ms(algorithm.quantile(0.5)),
        "algorithm_p99_ms": ms(algorithm.quantile(0.99)),
        "framework_ms_per_attempt": ms(framework / algorithm.count if algorithm.count else None),
        "attempt_ms_mean": ms(attempt.mean),
        "attempt_p50_ms": ms(attempt.quantile(0.5)),
        "attempt_p99_ms": ms(attempt.quantile(0.99)),
        "e2e_ms_mean": None if e2e is None else ms(e2e.mean),
        "sli_p50_ms": ms(sli.quantile(0.5)),
        "sli_p99_ms": ms(sli.quantile(0.99)),
        "pending_after": int(metric_value(text, "scheduler_pending_pods")),
    }


# -- watching the burst -----------------------------------------------------------------------


class BindWatch(threading.Thread):
    """Watches a namespace's pods from `resource_version` and timestamps (monotonic) the
    first event of each expected pod that carries spec.nodeName. Bounded: it ends when
    every pod is seen bound, at `deadline` or on `stop()` (a connection silent for
    WATCH_READ_TIMEOUT s is opened again from the last resourceVersion seen); `error` holds
    what ended it otherwise."""

    def __init__(
        self,
        cp: ControlPlane,
        namespace: str,
        expected: Sequence[str],
        resource_version: str,
        deadline: float,
    ) -> None:
        super().__init__(name=f"watch-{namespace}", daemon=True)
        self.server = cp.server
        self.token = cp.tokens[ADMIN_USER]
        self.ca_file = cp.ca_file
        self.namespace = namespace
        self.expected = frozenset(expected)
        self.resource_version = resource_version
        self.deadline = deadline
        self.bound: dict[str, float] = {}
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    @property
    def complete(self) -> bool:
        return len(self.bound) >= len(self.expected)

    def run(self) -> None:
        try:
            self._watch()
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.finished.set()

    def _watch(self) -> None:
        timeout = httpx.Timeout(10.0, read=WATCH_READ_TIMEOUT)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        with httpx.Client(
            base_url=self.server, verify=str(self.ca_file), headers=headers, timeout=timeout
        ) as http:
            # Each connection lasts until the deadline or WATCH_READ_TIMEOUT s of silence.
            connections = int((self.deadline - time.monotonic()) / WATCH_READ_TIMEOUT) + 10
            for _ in range(max(1, connections)):
                remaining = self.deadline - time.monotonic()
                if self.complete or self._halt.is_set() or remaining <= 0:
                    return
                params = {
                    "watch": "1",
                    "resourceVersion": self.resource_version,
                    "timeoutSeconds": str(max(1, int(remaining))),
                }
                with contextlib.suppress(httpx.ReadTimeout, httpx.RemoteProtocolError):
                    self._stream(http, path, params)
            raise RuntimeError(f"watch {path}: {connections} connections, still not done")

    def _stream(self, http: httpx.Client, path: str, params: Mapping[str, str]) -> None:
        """One watch connection, until it ends, every pod is bound, or stop()."""
        with http.stream("GET", path, params=params) as resp:
            if resp.status_code != 200:
                resp.read()
                raise RuntimeError(f"watch {path}: HTTP {resp.status_code}: {resp.text}")
            for line in resp.iter_lines():
                if line:
                    self._event(orjson.loads(line))
                if self.complete or self._halt.is_set():
                    return

    def _event(self, event: JSON) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        meta = obj.get("metadata") or {}
        self.resource_version = meta.get("resourceVersion", self.resource_version)
        name = meta.get("name", "")
        if (obj.get("spec") or {}).get("nodeName") and name in self.expected:
            self.bound.setdefault(name, time.monotonic())


# -- the extenders ----------------------------------------------------------------------------


@dataclass
class Extender:
    """The variant's extender process: ours (through the control plane) or do-nothing."""

    variant: str
    port: int = 0
    pid: int | None = None
    log: Path | None = None
    process: Process | None = None
    cp: ControlPlane | None = None

    def alive(self) -> bool:
        if self.variant == "none":
            return True
        if self.process is not None:
            return self.process.alive()
        return self.cp is not None and self.cp.extender is not None and self.cp.extender.alive()

    def requests(self) -> JSON:
        """Our service's answered requests by verb (from its /metrics); {} otherwise."""
        if self.cp is None or self.cp.extender is None:
            return {}
        status, body = self.cp.extender.get("/metrics")
        if status != 200:
            return {}
        counts: Counter[str] = Counter()
        for labels, value in metric_samples(body.decode(), "decice_requests_total"):
            counts[labels.get("verb", "")] += int(value)
        return dict(sorted(counts.items()))

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        elif self.cp is not None:
            self.cp.stop_extender()


def start_donothing(work: Path, timeout: float = 60.0, kubeconfig: Path | None = None) -> Extender:
    """tests/benchmarks/donothing.py on a free port, until /healthz answers (a port taken
    meanwhile: another port, at most 3 times); with its bind verb when `kubeconfig`."""
    log = work / "donothing.log"
    # `env` execs the interpreter: the pid stays the server's.
    env = ["env", f"KUBECONFIG={kubeconfig}"] if kubeconfig is not None else []
    with httpx.Client() as http:
        for _ in range(3):
            port = free_port()
            argv = [*env, sys.executable, str(DONOTHING), str(port)]
            proc = Process("donothing", argv, log).start()

            def healthy(port: int = port) -> bool:
                try:
                    return (
                        http.get(f"http://{LOCALHOST}:{port}/healthz", timeout=2.0).status_code
                        == 200
                    )
                except httpx.HTTPError:
                    return False

            try:
                proc.wait_ready(healthy, timeout, "the do-nothing extender answers /healthz")
            except Exception:
                proc.stop()
                if proc.port_taken():
                    continue
                raise
            return Extender("donothing", port=port, pid=proc.pid, log=log, process=proc)
    raise RunFailed(f"the do-nothing extender found its port taken 3 times (log {log})")


def start_extender(
    cp: ControlPlane,
    variant: str,
    work: Path,
    policies: Mapping[str, JSON],
    before_tree: Path | None = None,
) -> Extender:
    if variant == "donothing":
        return start_donothing(work)
    if variant == "donothing-bind":
        return start_donothing(work, kubeconfig=cp.kubeconfig(EXTENDER_USER))
    if variant == "none":
        return Extender("none")
    env: dict[str, str] | None = None
    if variant == "ours-before":
        if before_tree is None:
            raise RunFailed("variant ours-before needs --before-tree")
        env = {"PYTHONPATH": str(before_tree)}
    service = cp.start_extender(policies[variant], env=env, workdir=work)
    return Extender(variant, port=service.port, pid=service.pid, log=service.stderr_path, cp=cp)


# -- one run ----------------------------------------------------------------------------------


def process_cpu(pids: Mapping[str, int | None]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pid in pids.items():
        if pid is not None:
            with contextlib.suppress(OSError):
                # The extender's children too (its metrics fetch process, if any).
                out[name] = cpu_with_children(pid)
    return out


def wait_quiet(pids: Mapping[str, int | None], log: Log, timeout: float = QUIET_TIMEOUT) -> float:
    """Until the processes together use under QUIET_CORES over a QUIET_WINDOW; seconds
    waited. RunFailed after `timeout`."""
    began = time.monotonic()
    deadline = began + timeout
    busiest: dict[str, float] = {}
    while time.monotonic() < deadline:
        before, t0 = process_cpu(pids), time.monotonic()
        time.sleep(QUIET_WINDOW)
        after, t1 = process_cpu(pids), time.monotonic()
        cores = {k: (after[k] - before[k]) / (t1 - t0) for k in before if k in after}
        if sum(cores.values()) < QUIET_CORES:
            waited = round(time.monotonic() - began, 2)
            if waited > 5 * QUIET_WINDOW:
                log(f"quiet after {waited:.1f} s")
            return waited
        busiest = cores
    shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(busiest.items()))
    raise RunFailed(f"the cluster is not quiet after {timeout:.0f} s (cores: {shares})")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RunFailed(f"not done after {timeout:.0f} s: {what}")
        time.sleep(0.1)


def placement(cp: ControlPlane, namespace: str) -> tuple[int, Counter[str]]:
    """(pods bound, pods per node) as the API server holds them."""
    per_node: Counter[str] = Counter()
    for pod in cp.kube.pods(namespace):
        node = pod["spec"].get("nodeName")
        if node:
            per_node[node] += 1
    return sum(per_node.values()), per_node


def log_paths(cp: ControlPlane, extender: Extender | None) -> str:
    paths = {name: str(path) for name, path in cp.log_paths().items()}
    if extender is not None and extender.process is not None and extender.log is not None:
        paths[extender.variant] = str(extender.log)
    return ", ".join(f"{k}: {v}" for k, v in sorted(paths.items()))


@dataclass
class Bench:
    cp: ControlPlane
    work: Path
    sizes: Sizes
    nodes: list[FakeNode]
    configs: dict[str, JSON]
    policies: dict[str, JSON]
    burst_timeout: float
    log: Log
    runs: list[JSON] = field(default_factory=list)
    before_tree: Path | None = None

    def warm_up(self, variants: Sequence[str]) -> float:
        """One small unrecorded burst per variant: the first Binding the API server takes
        from a user, its first namespace of pods, the first scheduler start are slower
        (a 50-pod run measured 45 ms per attempt against 6-9 ms warm). Seconds taken."""
        began = time.monotonic()
        pods = self.sizes.pods
        self.sizes = Sizes(self.sizes.nodes, min(WARMUP_PODS, pods), self.sizes.runs)
        try:
            for variant in variants:
                self.run(variant, 0)
        finally:
            self.sizes = Sizes(self.sizes.nodes, pods, self.sizes.runs)
        return time.monotonic() - began

    def run(self, variant: str, index: int) -> JSON:
        """Run `index` (0: the warm-up) of `variant`: its row."""
        namespace = f"burst-{variant}-{index}"
        extender: Extender | None = None
        try:
            extender = start_extender(self.cp, variant, self.work, self.policies, self.before_tree)
            return self._burst(variant, index, namespace, extender)
        except Exception as exc:
            raise RunFailed(
                f"{variant} run {index}: {exc}\nlogs: {log_paths(self.cp, extender)}"
            ) from exc
        finally:
            self.cp.stop_scheduler()
            if extender is not None:
                extender.stop()
            with contextlib.suppress(Exception):
                self.cp.kube.delete_namespace(namespace)

    def _burst(self, variant: str, index: int, namespace: str, extender: Extender) -> JSON:
        cp, pods = self.cp, self.sizes.pods
        names = [f"pod-{i:05d}" for i in range(pods)]
        cp.kube.create_namespace(namespace)
        cp.kube.create_pods(namespace, [pod_manifest(n) for n in names])
        listed = cp.kube.get(f"/api/v1/namespaces/{namespace}/pods", {"limit": "1"})
        quiet_pids = {**cp.pids(), "extender": extender.pid}
        quiet_pids.pop("kube-scheduler", None)
        quiet = wait_quiet(quiet_pids, self.log)
        cpu0 = process_cpu(quiet_pids)
        loadavg0 = os.getloadavg()[0]
        launched = time.monotonic()
        watch = BindWatch(
            cp,
            namespace,
            names,
            listed["metadata"]["resourceVersion"],
            launched + self.burst_timeout,
        )
        watch.start()
        try:
            cp.start_scheduler(self.configs[variant], extender_port=extender.port or None)
            started = time.monotonic()
            while not watch.finished.wait(1.0):
                if not cp.scheduler_running:
                    raise RunFailed("kube-scheduler exited during the burst")
                if not extender.alive():
                    raise RunFailed("the extender exited during the burst")
            if watch.error is not None:
                raise RunFailed(f"watching the burst: {watch.error!r}")
            if not watch.complete:
                raise RunFailed(
                    f"{len(watch.bound)}/{pods} pods bound after {self.burst_timeout:.0f} s"
                )
        finally:
            watch.stop()
            watch.join(WATCH_READ_TIMEOUT + 5)
        last = max(watch.bound.values())
        first = min(watch.bound.values())
        sched_pid = cp.pids().get("kube-scheduler")
        cpu1 = process_cpu({**quiet_pids, "kube-scheduler": sched_pid})
        loadavg1 = os.getloadavg()[0]
        cpu = {k: round(cpu1[k] - cpu0.get(k, 0.0), 3) for k in cpu1}

        def settled() -> bool:
            text = cp.scheduler_metrics()
            done = metric_value(text, "scheduler_schedule_attempts_total", {"result": "scheduled"})
            return done >= pods and metric_value(text, "scheduler_pending_pods") == 0

        wait_for(
            settled, SETTLE_TIMEOUT, "the scheduler counts every pod scheduled, its queue empty"
        )
        text = cp.scheduler_metrics()
        (self.work / f"scheduler-metrics-{variant}-{index}.txt").write_text(text)
        numbers = scheduler_numbers(text)
        bound, per_node = placement(cp, namespace)
        row: JSON = {
            "variant": variant,
            "run": index,
            "nodes": len(self.nodes),
            "pods": pods,
            "pods_bound": bound,
            "bound_seen": len(watch.bound),
            **numbers,
            "wall_s": round(last - launched, 3),
            "startup_s": round(started - launched, 3),
            "first_bound_s": round(first - launched, 3),
            "cpu_s": cpu,
            "max_pods_per_node": max(per_node.values(), default=0),
            "nodes_used": len(per_node),
            "extender_requests": extender.requests(),
            "quiet_wait_s": quiet,
            "loadavg_1m": [round(loadavg0, 2), round(loadavg1, 2)],  # before, after
        }
        return row


# -- summary and output -------------------------------------------------------------------------


def spread(values: Sequence[float | None]) -> JSON:
    """{median, min, max} of the values present (None when none is)."""
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(present), 3),
        "min": round(min(present), 3),
        "max": round(max(present), 3),
    }


def row_value(row: JSON, key: str) -> float | None:
    if key == "scheduler_cpu_s":
        return row["cpu_s"].get("kube-scheduler")  # type: ignore[no-any-return]
    if key == "extender_cpu_s":
        return row["cpu_s"].get("extender")  # type: ignore[no-any-return]
    value = row[key]
    return None if value is None else float(value)


def summarize(runs: Sequence[JSON], variants: Sequence[str]) -> tuple[JSON, JSON]:
    """(summary per variant, ratios per variant to BASELINE)."""
    by_variant = {v: [r for r in runs if r["variant"] == v] for v in variants}
    summary = {
        v: {key: spread([row_value(r, key) for r in rows]) for key in SUMMARY_KEYS}
        for v, rows in by_variant.items()
    }
    ratios: JSON = {}
    if BASELINE in by_variant:
        base_rows = by_variant[BASELINE]
        for v in variants:
            if v == BASELINE:
                continue
            ratios[f"{v} / {BASELINE}"] = {
                key: ratio(
                    summary[v][key]["median"],
                    summary[BASELINE][key]["median"],
                    [
                        (row_value(a, key), row_value(b, key))
                        for a, b in zip(by_variant[v], base_rows, strict=False)
                    ],
                )
                for key in RATIO_KEYS
            }
    return summary, ratios


def ratio(
    a: float | None, b: float | None, pairs: Sequence[tuple[float | None, float | None]]
) -> JSON:
    """The ratio of the medians, and the min-max of the paired runs' ratios."""
    paired = [x / y for x, y in pairs if x is not None and y]
    return {
        "median_ratio": round(a / b, 3) if a is not None and b else None,
        "paired_min": round(min(paired), 3) if paired else None,
        "paired_max": round(max(paired), 3) if paired else None,
    }


def fmt(cell: JSON, digits: int = 2) -> str:
    if cell["median"] is None:
        return "-"
    if cell["min"] == cell["max"]:
        return f"{cell['median']:.{digits}f}"
    return f"{cell['median']:.{digits}f} ({cell['min']:.{digits}f}-{cell['max']:.{digits}f})"


TABLE_COLUMNS = (
    ("algorithm_ms_per_attempt", "algo ms/attempt", 2),
    ("algorithm_p50_ms", "algo p50", 1),
    ("algorithm_p99_ms", "algo p99", 1),
    ("framework_ms_per_attempt", "plugins ms", 2),
    ("attempt_ms_mean", "attempt ms (+bind)", 2),
    ("wall_s", "wall s", 1),
    ("pods_bound", "bound", 0),
    ("attempts", "attempts", 0),
    ("scheduler_cpu_s", "sched cpu s", 1),
    ("extender_cpu_s", "ext cpu s", 1),
)


def format_table(summary: JSON, ratios: JSON) -> str:
    header = ["variant", *(title for _, title, _ in TABLE_COLUMNS)]
    rows = [
        [variant, *(fmt(cells[key], digits) for key, _, digits in TABLE_COLUMNS)]
        for variant, cells in summary.items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    for name, cells in ratios.items():
        parts = []
        for key in RATIO_KEYS:
            c = cells[key]
            if c["median_ratio"] is None:
                continue
            span = (
                f" ({c['paired_min']:.2f}-{c['paired_max']:.2f})"
                if c["paired_min"] != c["paired_max"]
                else ""
            )
            parts.append(f"{key} {c['median_ratio']:.2f}{span}")
        lines.append(f"{name}: " + "; ".join(parts))
    return "\n".join(lines)


def versions(cp: ControlPlane) -> JSON:
    assert cp.binaries is not None
    scheduler = subprocess.run(
        [str(cp.binaries.scheduler), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return {
        "kube-apiserver": cp.kube.get("/version").get("gitVersion"),
        "kube-scheduler": scheduler.stdout.strip().split()[-1]
        if scheduler.stdout.strip()
        else None,
    }


# -- main ---------------------------------------------------------------------------------------


OFF = "off"
"""`--shortlist 0`: prioritize.shortlist null."""


def shortlist_arg(text: str) -> JSON | str:
    """`--shortlist NODES[,SHARE]` as prioritize.shortlist (0: `OFF`)."""
    nodes, _, share = text.partition(",")
    if int(nodes) == 0:
        return OFF
    return {"nodes": int(nodes), **({"share": float(share)} if share else {})}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.realburst", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="50 nodes, 50 pods, 1 run per variant")
    p.add_argument("--nodes", type=int, help="fake nodes (default 1000; quick 50)")
    p.add_argument("--pods", type=int, help="pods per burst (default 1000; quick 50)")
    p.add_argument("--runs", type=int, help="runs per variant (default 3; quick 1)")
    p.add_argument("--json", type=Path, help="write every run, the summary and the ratios here")
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, run interleaved in this order, of: {', '.join(ALL_VARIANTS)}",
    )
    p.add_argument("--workdir", type=Path, help="keep the control plane's files and logs here")
    p.add_argument("--burst-timeout", type=float, help="seconds a burst may take (600; quick 180)")
    p.add_argument(
        "--max-hosts", type=int, help="prioritize.maxHosts of our variants (default: all)"
    )
    p.add_argument(
        "--shortlist",
        type=shortlist_arg,
        help="prioritize.shortlist of our variants but ours-all: NODES[,SHARE] (default: the "
        "shipped rule; 0: null, every passing node)",
    )
    p.add_argument(
        "--percentage",
        type=int,
        default=100,
        help="percentageOfNodesToScore (default 100; 0: unset, the scheduler's own default)",
    )
    p.add_argument(
        "--before-tree",
        type=Path,
        help="variant ours-before: ours-bind run from this tree's `extender` package (a "
        "`git archive` of an older commit), for A/B runs interleaved in one sitting",
    )
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(ALL_VARIANTS))
    if unknown or not variants or len(set(variants)) != len(variants):
        p.error(f"--variants: give distinct names among {', '.join(ALL_VARIANTS)}")
    if "ours-before" in variants and args.before_tree is None:
        p.error("--variants ours-before needs --before-tree")
    args.variants = variants
    base = QUICK if args.quick else FULL
    args.sizes = Sizes(
        nodes=args.nodes or base.nodes, pods=args.pods or base.pods, runs=args.runs or base.runs
    )
    if min(args.sizes.nodes, args.sizes.pods, args.sizes.runs) < 1:
        p.error("--nodes, --pods and --runs must be at least 1")
    if args.burst_timeout is None:
        args.burst_timeout = QUICK_BURST_TIMEOUT if args.quick else BURST_TIMEOUT
    return args


@contextlib.contextmanager
def workdir(given: Path | None) -> Iterator[Path]:
    """`given` (kept), or a temporary folder removed after a run that succeeded."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    path = Path(tempfile.mkdtemp(prefix="realburst-"))
    yield path  # on an exception the folder (and its logs) stays
    shutil.rmtree(path, ignore_errors=True)


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None, log: Log = stderr_log) -> int:
    args = parse_args(argv)
    sizes: Sizes = args.sizes
    began = time.monotonic()
    try:
        with workdir(args.workdir) as work, ControlPlane(work / "cluster") as cp:
            log(f"control plane up in {cp.started_in:.1f} s (work dir {work})")
            nodes = fake_nodes(sizes.nodes)
            made = cp.kube.ensure_nodes(nodes)
            log(f"{sizes.nodes} fake nodes in {made:.1f} s")
            policies = our_policies(nodes, args.max_hosts, args.shortlist)
            configs = scheduler_configs(cp, work, policies, args.percentage)
            bench = Bench(
                cp,
                work,
                sizes,
                nodes,
                configs,
                policies,
                args.burst_timeout,
                log,
                before_tree=args.before_tree,
            )
            warm = bench.warm_up(args.variants)
            log(f"warm-up ({min(WARMUP_PODS, sizes.pods)} pods per variant) in {warm:.1f} s")
            for index in range(1, sizes.runs + 1):
                for variant in args.variants:
                    row = bench.run(variant, index)
                    bench.runs.append(row)
                    log(
                        f"{variant} run {index}: {row['pods_bound']}/{sizes.pods} bound in "
                        f"{row['wall_s']:.1f} s, {row['algorithm_ms_per_attempt']} ms/attempt "
                        f"(algorithm), {row['attempts']} attempts"
                    )
            summary, ratios = summarize(bench.runs, args.variants)
            result: JSON = {
                "quick": args.quick,
                "sizes": {"nodes": sizes.nodes, "pods": sizes.pods, "runs": sizes.runs},
                "variants": args.variants,
                "machine": {
                    "nproc": os.cpu_count(),
                    "cpu": cpu_model(),
                    "python": sys.version.split()[0],
                },
                "versions": versions(cp),
                "scheduler_qps": SCHEDULER_QPS,
                "percentage_of_nodes_to_score": args.percentage or None,
                "extenders": {v: (configs[v].get("extenders") or [None])[0] for v in args.variants},
                "policy": {
                    k: v
                    for k, v in policy(nodes[:0], True, args.max_hosts, args.shortlist).items()
                    if k not in ("static", "bind")
                },
                "runs": bench.runs,
                "summary": summary,
                "ratios": ratios,
                "seconds": round(time.monotonic() - began, 1),
            }
    except RunFailed as exc:
        log(f"realburst failed: {exc}")
        return 1
    table = format_table(summary, ratios)
    print(
        f"{sizes.nodes} nodes, {sizes.pods} pods, {sizes.runs} run(s) per variant; medians "
        f"(min-max); {result['versions']}; {result['seconds']} s in all"
    )
    print(table)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
