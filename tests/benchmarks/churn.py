"""What pod churn the service does not need costs it, on the real API server.

    python -m tests.benchmarks.churn [--quick] [--nodes 2000] [--pods 4000] [--rate 200]
        [--seconds 20] [--runs 3] [--variants on,off] [--before-tree DIR]
        [--shape kubelet|lean] [--policy shipped|static] [--segment 1448] [--gap 0.0001]
        [--json FILE]

A real control plane (tests/harness/controlplane.py: etcd and kube-apiserver on
127.0.0.1), N fake nodes, P pods created already bound to them (`spec.nodeName`, placed
by another scheduler, long before the service starts: the first run waits until they
are older than the herd guard's span, so no variant counts them as recent assignments).
Then for each run of each variant, interleaved (on 1, off 1, on 2, ...):

1. our service starts (`decice-extender serve`) with the pod watch on (`on`), off (`off`:
   `kubernetes.watchPods: false`), or on from the code in `--before-tree` (`before`: a
   `git archive` of an older commit, run with PYTHONPATH there), and lists. Its policy
   (`--policy shipped`, the default) is config/extender.yaml unchanged, with only
   PROMETHEUS_URL set, at a real Prometheus on loopback scraping every node's CPU
   (tests/harness/promharness.py): bind, Events, requeue, the herd guard with its usage
   queries, as a user runs it; `static` is a static 2-metric policy, bind off.
   It reads the API server through a TCP gate (tests/harness/gate.py) that delivers the
   bytes as a network does, in `--segment`-byte TCP segments `--gap` seconds apart: over
   loopback (`--segment 0`) a whole watch event arrives at once and wakes the service
   once, across a network it arrives a segment at a time, and each can wake it;
2. **churn**: the pods' status is patched at R a second (the Ready condition flipped and
   its time moved, through the status subresource, as kubelets report) for S seconds;
   with `--shape kubelet` (the default) the pods are a Deployment's (labels, an owner)
   and each report is the whole status a kubelet writes for a running pod (five
   conditions, host and pod IPs, the container's status with its image and container
   IDs, resources and mounts): about twice the bytes of a `lean` one (the Ready and
   PodScheduled conditions alone), and what a user's cluster sends;
   the service's CPU seconds over that window (utime + stime of the process and its
   children, /proc) per 1,000 updates (`cpu_ms_per_1000`), its threads' voluntary
   context switches (`wakeups_per_1000`: what a dropped event costs is mostly the wake-up
   that reads it), and the API server's and etcd's (`apiserver_cpu_ms_per_1000`: what
   the watch costs on the other side of it);
3. **churn + verbs**: the same churn while one client sends filter and prioritize (every
   node's name, the captured pod) at `VERB_RATE` a second each: server time
   (`Server-Timing`) and round trip, p50 and p99, and the service's CPU per 1,000 updates
   with the verbs' in it (`churn.cpu_ms_per_1000`: on minus off is the watch's cost while
   the verbs are answered, as in a cluster whose scheduler calls us);
4. **quiet + verbs**: the verbs alone, no churn (what the API server's own CPU on these
   shared cores does to the verbs shows in the difference).

Printed: medians (min-max) per variant, and the ratios on / off of CPU per 1,000 updates
and of the verbs' p99 during churn. Bounded: each phase stops after S seconds, each wait
has a ceiling; a stuck phase raises naming the logs. `--quick` (50 nodes, 100 pods, 20
updates a second, 1.5 s phases, 1 run) is what test_churn_quick.py runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from extender.decisions.assignments import CLOCK_SKEW
from extender.decisions.guard import HerdGuard
from extender.policy.loading import load_settings
from extender.policy.sections import HerdGuardSettings
from tests.benchmarks.bench import cpu_model
from tests.benchmarks.burst import cpu_with_children
from tests.benchmarks.realburst import policy as burst_policy
from tests.harness.controlplane import ControlPlane, FakeNode, Kube, fake_nodes, pod_manifest
from tests.harness.loopback import LOCALHOST
from tests.harness.promharness import FakeExporter, running_exporter, running_prometheus

JSON = dict[str, Any]
Log = Callable[[str], None]

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "kube-scheduler" / "filter-nodecache.json"
SHIPPED = ROOT / "config" / "extender.yaml"
POLICIES = ("shipped", "static")
MSS = 1448
"""An Ethernet link's TCP segment payload (1500-byte MTU, timestamps on)."""
GAP = 0.0001
"""Seconds between two segments of one write: a reader woken by the first has not read
the whole event when the next arrives, as across a network (the relay's sleep is coarse:
the link it makes is slower than a data centre's, never the bottleneck at 200 updates/s)."""
VARIANTS = ("on", "off")
CONTROL_PLANE = ("kube-apiserver", "etcd")
"""The processes whose CPU during the churn is `apiserver_cpu_ms_per_1000`: with the watch
on, the API server also encodes and sends every update to the service."""
ALL_VARIANTS = (*VARIANTS, "before")
NAMESPACE = "churn"
VERB_RATE = 10.0
"""Filter and prioritize calls a second, each, during the verbs' phases."""
PATCH_WORKERS = 8
SLACK = 30.0
"""Seconds a phase may overrun its S before it fails."""


@dataclass(frozen=True)
class Sizes:
    nodes: int
    pods: int
    rate: float
    seconds: float
    runs: int


SHAPES = ("kubelet", "lean")
"""How big each pod and each status report are: a kubelet's, or the old bench's lean ones."""

FULL = Sizes(nodes=2000, pods=4000, rate=200.0, seconds=20.0, runs=3)
QUICK = Sizes(nodes=50, pods=100, rate=40.0, seconds=1.5, runs=1)

RUN_KEYS = (
    "variant",
    "run",
    "updates",
    "updates_per_s",
    "cpu_s",
    "cpu_ms_per_1000",
    "wakeups_per_1000",
    "apiserver_cpu_ms_per_1000",
    "churn",
    "quiet",
    "watch_events",
    "watch_dropped",
    "reservations",
    "loadavg_1m",
)


class ChurnFailed(RuntimeError):
    pass


# -- the churn --------------------------------------------------------------------------------


def status_patch(i: int, shape: str = "kubelet", pod: int = 0) -> JSON:
    """The i-th report of pod number `pod`: Running, its Ready condition flipped, a new
    time; `kubelet`: with the rest of what a kubelet reports of a running pod."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - (i % 2)))
    ready = "True" if i % 2 else "False"
    if shape == "lean":
        return {
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": ready, "lastTransitionTime": stamp},
                ],
            }
        }
    started = "2026-01-01T00:00:00Z"
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        for kind in ("PodReadyToStartContainers", "Initialized")
    ]
    conditions += [
        {"type": kind, "status": ready, "lastProbeTime": None, "lastTransitionTime": stamp}
        for kind in ("Ready", "ContainersReady")
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": started,
        }
    )
    host, ip = (
        f"10.0.{pod // 250 % 256}.{pod % 250 + 1}",
        f"10.244.{pod // 250 % 256}.{pod % 250 + 2}",
    )
    digest = f"{pod:064x}"
    return {
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": host,
            "hostIPs": [{"ip": host}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": started,
            "containerStatuses": [
                {
                    "name": "c0",
                    "state": {"running": {"startedAt": started}},
                    "lastState": {},
                    "ready": ready == "True",
                    "restartCount": 0,
                    "image": "registry.k8s.io/pause:3.10",
                    "imageID": "registry.k8s.io/pause@sha256:" + "f" * 64,  # a digest's size
                    "containerID": f"containerd://{digest}",
                    "started": True,
                    "allocatedResources": {"cpu": "100m", "memory": "64Mi"},
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-7xk2p",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                            "recursiveReadOnly": "Disabled",
                        }
                    ],
                }
            ],
            "qosClass": "Burstable",
        }
    }


def churn_pod(name: str, node: str, index: int, shape: str) -> JSON:
    """A pod another scheduler placed on `node`; `kubelet`: one of a Deployment's."""
    if shape == "lean":
        return pod_manifest(name, scheduler_name="default-scheduler", node_name=node)
    template = f"web-{index % 40}-5d8f7c9b6d"
    return pod_manifest(
        name,
        scheduler_name="default-scheduler",
        node_name=node,
        labels={"app.kubernetes.io/name": f"web-{index % 40}", "pod-template-hash": "5d8f7c9b6d"},
        owner_references=[
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": template,
                "uid": f"00000000-0000-4000-8000-{index % 40:012d}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )


def churn(
    kube: Kube, names: Sequence[str], rate: float, seconds: float, shape: str = "kubelet"
) -> int:
    """Patch the pods' status at `rate` a second for `seconds` (round robin over `names`),
    from PATCH_WORKERS threads on one schedule; the updates made."""
    total = max(1, int(rate * seconds))
    began = time.monotonic()
    deadline = began + seconds + SLACK
    count = [0]
    lock = threading.Lock()

    def one(i: int) -> None:
        wait = began + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if time.monotonic() > deadline:
            raise ChurnFailed(f"the churn fell {SLACK:.0f} s behind its schedule")
        pod = i % len(names)
        kube.merge_patch(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{names[pod]}/status",
            status_patch(i, shape, pod),
        )
        with lock:
            count[0] += 1

    with concurrent.futures.ThreadPoolExecutor(PATCH_WORKERS) as pool:
        # Submitted in order; each worker waits for its slot, so at most PATCH_WORKERS
        # updates are in flight and the rate holds while the API server keeps up.
        for future in [pool.submit(one, i) for i in range(total)]:
            future.result(timeout=max(1.0, deadline - time.monotonic()))
    return count[0]


# -- the verbs --------------------------------------------------------------------------------


@dataclass
class Timings:
    server_ms: dict[str, list[float]] = field(
        default_factory=lambda: {"filter": [], "prioritize": []}
    )
    rtt_ms: dict[str, list[float]] = field(default_factory=lambda: {"filter": [], "prioritize": []})

    def summary(self) -> JSON:
        out: JSON = {}
        for verb in ("filter", "prioritize"):
            for kind, samples in (("server", self.server_ms[verb]), ("rtt", self.rtt_ms[verb])):
                out[f"{verb}_{kind}_p50"] = quantile(samples, 0.5)
                out[f"{verb}_{kind}_p99"] = quantile(samples, 0.99)
            out[f"{verb}_calls"] = len(self.rtt_ms[verb])
        return out


def quantile(samples: Sequence[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def verbs(port: int, body: bytes, seconds: float, halt: threading.Event) -> Timings:
    """Filter then prioritize, each VERB_RATE a second, for `seconds` (or until `halt`)."""
    timings = Timings()
    conn = http.client.HTTPConnection(LOCALHOST, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    began = time.monotonic()
    for i in range(int(seconds * VERB_RATE) + 1):
        wait = began + i / VERB_RATE - time.monotonic()
        if wait > 0 and halt.wait(wait):
            break
        for verb in ("filter", "prioritize"):
            t0 = time.perf_counter()
            conn.request("POST", f"/{verb}", body, headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise ChurnFailed(f"POST /{verb}: HTTP {resp.status}: {data[:200]!r}")
            timings.rtt_ms[verb].append((time.perf_counter() - t0) * 1000)
            timing = resp.getheader("Server-Timing") or "dur=nan"
            timings.server_ms[verb].append(float(timing.split("dur=", 1)[1].split(",")[0]))
    conn.close()
    return timings


# -- one run ----------------------------------------------------------------------------------


@dataclass
class Bench:
    cp: ControlPlane
    work: Path
    sizes: Sizes
    names: list[str]
    body: bytes
    policy: JSON
    before_tree: Path | None
    log: Log
    shape: str = "kubelet"
    env: dict[str, str] = field(default_factory=dict)
    """The service's environment beyond KUBECONFIG (PROMETHEUS_URL for the shipped policy)."""
    segment: int = 0
    """The TCP segments the API server's bytes reach the service in (0: loopback's whole writes)."""
    gap: float = GAP
    runs: list[JSON] = field(default_factory=list)

    def run(self, variant: str, index: int) -> JSON:
        policy = dict(self.policy)
        policy["kubernetes"] = {**(policy.get("kubernetes") or {}), "watchPods": variant != "off"}
        env = dict(self.env)
        if variant == "before":
            if self.before_tree is None:
                raise ChurnFailed("variant before needs --before-tree")
            env["PYTHONPATH"] = str(self.before_tree)
        if self.segment:
            gate, kubeconfig = self.cp.api_gate(self.work, segment=self.segment, gap=self.gap)
            gate.open()  # closed with the service
            env["KUBECONFIG"] = str(kubeconfig)
        service = self.cp.start_extender(policy, env=env, workdir=self.work, log_level="warning")
        try:
            return self._phases(variant, index, service.port, service.pid)
        except Exception as exc:
            raise ChurnFailed(f"{variant} run {index}: {exc} (log {service.stderr_path})") from exc
        finally:
            self.cp.stop_extender()

    def _phases(self, variant: str, index: int, port: int, pid: int) -> JSON:
        sizes, kube = self.sizes, self.cp.kube
        load0 = os.getloadavg()[0]
        plane = [p for name, p in self.cp.pids().items() if name in CONTROL_PLANE]
        plane0 = sum(cpu_with_children(p) for p in plane)
        woken0, cpu0, t0 = wakeups(pid), cpu_with_children(pid), time.monotonic()
        updates = churn(kube, self.names, sizes.rate, sizes.seconds, self.shape)
        cpu1, t1, woken = cpu_with_children(pid), time.monotonic(), wakeups(pid) - woken0
        plane_cpu = sum(cpu_with_children(p) for p in plane) - plane0
        halt = threading.Event()
        cpu2 = cpu_with_children(pid)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            timed = pool.submit(verbs, port, self.body, sizes.seconds + SLACK, halt)
            try:
                updates_b = churn(kube, self.names, sizes.rate, sizes.seconds, self.shape)
            finally:
                halt.set()
            during = timed.result(timeout=SLACK + sizes.seconds)
        cpu_b = cpu_with_children(pid) - cpu2
        quiet = verbs(port, self.body, sizes.seconds, threading.Event())
        detail = self._watch_detail(port)
        cpu = cpu1 - cpu0
        return {
            "variant": variant,
            "run": index,
            "updates": updates,
            "updates_per_s": round(updates / (t1 - t0), 1),
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_1000": round(cpu * 1000 / updates * 1000, 2),
            "wakeups_per_1000": round(woken / updates * 1000, 1),
            "apiserver_cpu_ms_per_1000": round(plane_cpu * 1000 / updates * 1000, 2),
            "churn": {
                "updates": updates_b,
                "cpu_ms_per_1000": round(cpu_b * 1000 / updates_b * 1000, 2),
                **during.summary(),
            },
            "quiet": quiet.summary(),
            "watch_events": detail.get("events"),
            "watch_dropped": detail.get("dropped"),
            "reservations": detail.get("reservations"),
            "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }

    def _watch_detail(self, port: int) -> JSON:
        conn = http.client.HTTPConnection(LOCALHOST, port, timeout=10)
        conn.request("GET", "/readyz")
        doc = orjson.loads(conn.getresponse().read())
        conn.close()
        pods: JSON = dict((doc.get("watches") or {}).get("pods") or {})
        # What the herd guard counts: the pods made just before the service started are
        # recent assignments to it, held until a refresh shows them.
        pods["reservations"] = (doc.get("herdGuard") or {}).get("reservations")
        return pods


def wakeups(pid: int) -> int:
    """Voluntary context switches of the process's threads so far (/proc): each is a wait
    that ended, for a socket, a timer or a lock."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


# -- summary ----------------------------------------------------------------------------------


def spread(values: Sequence[float | None]) -> JSON:
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(present), 3),
        "min": round(min(present), 3),
        "max": round(max(present), 3),
    }


SUMMARY: tuple[tuple[str, Callable[[JSON], float | None]], ...] = (
    ("cpu_ms_per_1000", lambda r: r["cpu_ms_per_1000"]),
    ("wakeups_per_1000", lambda r: r.get("wakeups_per_1000")),
    ("apiserver_cpu_ms_per_1000", lambda r: r.get("apiserver_cpu_ms_per_1000")),
    ("churn_cpu_ms_per_1000", lambda r: r["churn"].get("cpu_ms_per_1000")),
    ("churn_filter_server_p99", lambda r: r["churn"]["filter_server_p99"]),
    ("churn_prioritize_server_p99", lambda r: r["churn"]["prioritize_server_p99"]),
    ("churn_filter_rtt_p99", lambda r: r["churn"]["filter_rtt_p99"]),
    ("churn_prioritize_rtt_p99", lambda r: r["churn"]["prioritize_rtt_p99"]),
    ("churn_filter_server_p50", lambda r: r["churn"]["filter_server_p50"]),
    ("churn_prioritize_server_p50", lambda r: r["churn"]["prioritize_server_p50"]),
    ("quiet_filter_server_p99", lambda r: r["quiet"]["filter_server_p99"]),
    ("quiet_prioritize_server_p99", lambda r: r["quiet"]["prioritize_server_p99"]),
    ("updates_per_s", lambda r: r["updates_per_s"]),
)


def summarize(runs: Sequence[JSON], variants: Sequence[str]) -> tuple[JSON, JSON]:
    summary = {
        v: {key: spread([get(r) for r in runs if r["variant"] == v]) for key, get in SUMMARY}
        for v in variants
    }
    ratios: JSON = {}
    if "off" in summary:
        for v in variants:
            if v == "off":
                continue
            ratios[f"{v} / off"] = {
                key: (
                    round(summary[v][key]["median"] / summary["off"][key]["median"], 3)
                    if summary[v][key]["median"] and summary["off"][key]["median"]
                    else None
                )
                for key, _ in SUMMARY
                if key.startswith(("cpu", "apiserver", "churn"))
            }
            # What the watch costs: the CPU beyond the same churn with the watch off.
            mine, off = (
                summary[v]["cpu_ms_per_1000"]["median"],
                summary["off"]["cpu_ms_per_1000"]["median"],
            )
            if mine is not None and off is not None:
                ratios[f"{v} / off"]["cpu_ms_per_1000_beyond_off"] = round(mine - off, 2)
            # The same, while the verbs are answered (the CPU of the verbs is in both).
            mine, off = (
                summary[v]["churn_cpu_ms_per_1000"]["median"],
                summary["off"]["churn_cpu_ms_per_1000"]["median"],
            )
            if mine is not None and off is not None:
                ratios[f"{v} / off"]["churn_cpu_ms_per_1000_beyond_off"] = round(mine - off, 2)
    return summary, ratios


def format_table(summary: JSON, ratios: JSON) -> str:
    keys = [k for k, _ in SUMMARY]
    lines = []
    for variant, cells in summary.items():
        lines.append(f"[{variant}]")
        for key in keys:
            c = cells[key]
            if c["median"] is None:
                continue
            lines.append(f"  {key:30s} {c['median']:10.3f}  ({c['min']:.3f}-{c['max']:.3f})")
    for name, cells in ratios.items():
        shown = ", ".join(f"{k} {v:.2f}" for k, v in cells.items() if v is not None)
        lines.append(f"{name}: {shown}")
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.churn", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument("--nodes", type=int)
    p.add_argument("--pods", type=int)
    p.add_argument("--rate", type=float, help="status updates a second")
    p.add_argument("--seconds", type=float, help="seconds of each phase")
    p.add_argument("--runs", type=int)
    p.add_argument("--variants", default=",".join(VARIANTS), help=", ".join(ALL_VARIANTS))
    p.add_argument("--before-tree", type=Path, help="a tree with an older `extender` package")
    p.add_argument(
        "--shape",
        choices=SHAPES,
        default=SHAPES[0],
        help="the pods and their status reports: a kubelet's (default) or lean",
    )
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default=POLICIES[0],
        help="config/extender.yaml as shipped, at a real Prometheus (default), or a static one",
    )
    p.add_argument(
        "--segment",
        type=int,
        default=MSS,
        help=f"TCP segment the API server's bytes arrive in (default {MSS}; 0: loopback's)",
    )
    p.add_argument("--gap", type=float, default=GAP, help="seconds between two segments")
    p.add_argument("--json", type=Path)
    p.add_argument("--workdir", type=Path)
    args = p.parse_args(argv)
    if args.segment < 0 or args.gap < 0:
        p.error("--segment and --gap must be >= 0")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(ALL_VARIANTS) or len(set(variants)) != len(variants):
        p.error(f"--variants: distinct names among {', '.join(ALL_VARIANTS)}")
    if "before" in variants and args.before_tree is None:
        p.error("--variants before needs --before-tree")
    args.variants = variants
    base = QUICK if args.quick else FULL
    args.sizes = Sizes(
        nodes=args.nodes or base.nodes,
        pods=args.pods or base.pods,
        rate=args.rate or base.rate,
        seconds=args.seconds or base.seconds,
        runs=args.runs or base.runs,
    )
    return args


@contextlib.contextmanager
def workdir(given: Path | None) -> Iterator[Path]:
    import shutil
    import tempfile

    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    path = Path(tempfile.mkdtemp(prefix="churn-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def served_policy(
    name: str, nodes: Sequence[FakeNode], work: Path, stack: contextlib.ExitStack
) -> tuple[JSON, dict[str, str], float]:
    """The policy, the service's environment and the herd guard's span (seconds after
    which a placed pod no longer counts); `shipped` starts its Prometheus in `stack`."""
    if name == "static":
        # A static provider has no window: settle alone.
        return burst_policy(nodes, False), {}, HerdGuardSettings().settle
    exporter: FakeExporter = stack.enter_context(running_exporter())
    for i, node in enumerate(nodes):
        exporter.set(node.name, 0.05 + 0.8 * (i * 7919 % 1000) / 1000)  # spread, none hot
    prometheus = stack.enter_context(running_prometheus(exporter, work / "prometheus"))
    env = {"PROMETHEUS_URL": prometheus.url}
    return yaml.safe_load(SHIPPED.read_text()), env, HerdGuard(load_settings(SHIPPED, env)).span


def main(argv: Sequence[str] | None = None, log: Log = stderr_log) -> int:
    args = parse_args(argv)
    sizes: Sizes = args.sizes
    began = time.monotonic()
    with (
        workdir(args.workdir) as work,
        ControlPlane(work / "cluster") as cp,
        contextlib.ExitStack() as stack,
    ):
        nodes = fake_nodes(sizes.nodes)
        policy, env, span = served_policy(args.policy, nodes, work, stack)
        made = cp.kube.ensure_nodes(nodes)
        log(f"control plane up, {sizes.nodes} fake nodes in {made:.1f} s")
        cp.kube.create_namespace(NAMESPACE)
        names = [f"run-{i:06d}" for i in range(sizes.pods)]
        t = time.monotonic()
        cp.kube.create_pods(
            NAMESPACE,
            [churn_pod(n, nodes[i % len(nodes)].name, i, args.shape) for i, n in enumerate(names)],
        )
        log(f"{sizes.pods} pods placed by another scheduler in {time.monotonic() - t:.1f} s")
        if not args.quick:
            # Placed long before the service starts, as the story goes: older than the
            # herd guard's span (the clock skew allowed), so no variant holds them as
            # recent assignments (20,000 reservations in `on` against none in `off` had
            # made the verbs' p99 differ). --quick checks the shape only and does not wait.
            span += CLOCK_SKEW + 1.0
            log(f"waiting {span:.0f} s until the pods are older than the herd guard's span")
            time.sleep(span)
        captured = orjson.loads(CAPTURED.read_bytes())
        body = orjson.dumps(
            {"Pod": captured["Pod"], "Nodes": None, "NodeNames": [n.name for n in nodes]}
        )
        bench = Bench(
            cp,
            work,
            sizes,
            names,
            body,
            policy,
            args.before_tree,
            log,
            args.shape,
            env,
            args.segment,
            args.gap,
        )
        for index in range(1, sizes.runs + 1):
            for variant in args.variants:
                row = bench.run(variant, index)
                bench.runs.append(row)
                log(
                    f"{variant} run {index}: {row['updates']} updates at "
                    f"{row['updates_per_s']}/s, {row['cpu_ms_per_1000']} ms CPU and "
                    f"{row['wakeups_per_1000']} wake-ups per 1,000; "
                    f"during churn filter p99 {row['churn']['filter_server_p99']} ms, "
                    f"prioritize p99 {row['churn']['prioritize_server_p99']} ms (server); "
                    f"{row['reservations']} herd reservations"
                )
        summary, ratios = summarize(bench.runs, args.variants)
    result = {
        "quick": args.quick,
        "sizes": vars(sizes),
        "shape": args.shape,
        "policy": args.policy,
        "delivery": {"segment": args.segment, "gap": args.gap},
        "variants": args.variants,
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "python": sys.version.split()[0]},
        "runs": bench.runs,
        "summary": summary,
        "ratios": ratios,
        "seconds": round(time.monotonic() - began, 1),
    }
    print(
        f"{sizes.nodes} nodes, {sizes.pods} {args.shape} pods, the {args.policy} policy, "
        + (f"{args.segment}-byte segments, " if args.segment else "over loopback, ")
        + f"{sizes.rate:g} updates/s for "
        f"{sizes.seconds:g} s a phase, {sizes.runs} run(s); medians (min-max); "
        f"{result['seconds']} s in all"
    )
    print(format_table(summary, ratios))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
