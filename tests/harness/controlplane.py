"""A real Kubernetes control plane on 127.0.0.1 for end-to-end tests.

etcd, kube-apiserver (RBAC, bearer tokens from a token file, TLS) and, when asked, a
kube-scheduler running the KubeSchedulerConfiguration our own CLI prints, plus our
service as a real subprocess (`decice-extender serve`), each on free loopback ports:

    reason = unavailable_reason()          # None, or one line to pytest.skip with
    with ControlPlane(tmp_path) as cp:     # etcd + kube-apiserver, PKI, tokens, RBAC
        cp.kube.ensure_nodes(fake_nodes(5))
        cp.kube.create_namespace("demo")
        service = cp.start_extender(policy)            # decice-extender serve, KUBECONFIG
        cp.start_scheduler_for(service)                # scheduler-config --full, + kubeconfig
        cp.kube.create_pods("demo", [pod_manifest("p1")])
        node = cp.kube.wait_bound("demo", "p1", 60)

Binaries: kube-apiserver and kube-scheduler from ``$DECICE_K8S_BIN`` (a folder; point it
at your own Kubernetes), else from ``<repo>/../shared/k8s/unpack.sh``; etcd from
``$DECICE_ETCD``, else ``etcd`` on PATH (Debian: ``apt-get install etcd-server``).
`unavailable_reason()` says in one line what is missing.

There is no kubelet and no kube-controller-manager: a bound pod keeps
``status.phase: Pending`` with ``spec.nodeName`` set; nothing creates ServiceAccounts (so
`Kube.create_namespace` creates ``default``), nothing garbage-collects or finishes a
namespace deletion, and a PodDisruptionBudget's status is written by the test
(`Kube.set_pdb_status`). Deleting a bound pod needs grace period 0 (`Kube.delete_pods`),
or it stays Terminating waiting for a kubelet.

Who is who (tokens in ``pki/tokens.csv``, a kubeconfig each under the work dir):
``admin`` (system:masters; `ControlPlane.kube`), ``system:kube-scheduler`` (the
bootstrap ClusterRoles system:kube-scheduler and system:volume-scheduler are already
bound to that user; the Role for its Lease ``decice-system/decice-scheduler`` is what
``decice-extender scheduler-config --rbac --user system:kube-scheduler`` prints, applied
as printed) and ``decice-extender`` (the Helm chart's extender ClusterRole, rendered:
`extender_rbac`) and ``decice-rebalancer`` (the chart's rebalancer ClusterRole and its
Lease's Role in ``decice-system``, rendered: `rebalancer_rbac`; `start_rebalancer` runs
`decice-extender rebalance` as it).

Speed (measured on the shared 2-core machine: kube-apiserver v1.36.2, kube-scheduler
v1.35.4, Debian etcd 3.4.23; ranges over several runs, the high ends while other work
loaded the machine):

* `ControlPlane.start` (PKI, etcd, kube-apiserver until /readyz, RBAC): 2.5-3.8 s, nearly
  all of it kube-apiserver's post-start hooks (up.sh with no nodes: 3.9 s). The Python
  PKI (trustme's ECDSA CA and server certificate, one RSA-2048 service-account key)
  takes about 0.1 s. etcd's data stays in the work dir: on /dev/shm (tmpfs) 1,000 nodes
  took no less time (1.1-1.2 s against 0.8-1.0 s), and a killed run would leak RAM there.
* **1,000 fake nodes: 0.8-1.6 s** (`Kube.add_nodes`; up.sh takes ~40 s for them: 44 s
  with FAKE_NODES=1000 against 3.9 s with 0). How: ONE POST per node, carrying its
  status (the API server keeps a Node's status on create, as it must for a kubelet
  registering itself), with the TaintNodesByCondition admission plugin disabled, so no
  ``node.kubernetes.io/not-ready`` taint is added and no PATCH has to remove it; sent by
  16 threads over one keep-alive httpx pool (HTTP/1.1: the venv has no h2). Measured
  against it, 1,000 nodes: up.sh's three requests per node (create, status PATCH, taint
  PATCH) from 16 threads: 2.8-5.5 s; one POST per node from 1 thread: 1.8-2.0 s,
  8 threads: 0.9-1.6 s, 32 threads: 0.9-1.5 s (the API server's CPU is the limit on
  2 cores); httpx.AsyncClient with 8/16/32/64 requests in flight: 1.7/2.1/3.3/5.7 s.
* Removing 1,000 nodes (`Kube.remove_nodes`): 0.5-0.65 s, ten concurrent
  DELETE-collection calls of 100 names each (one DELETE per node from 16 threads:
  0.5-1.2 s; a single DELETE-collection: 0.85-0.9 s, the server runs one worker).
* 1,000 pods (`Kube.create_pods`, 16 threads): ~2.1 s.
* Our service (`start_extender`, until its watches have listed): ~0.5 s.
  kube-scheduler (`start_scheduler_for`, until /readyz and it holds its Lease): 0.25-0.3 s,
  a restart 0.2 s (on SIGTERM it releases the Lease); after a SIGKILL the next one waits
  out the leaseDuration: 15.7 s.

Every process is started with `subprocess.Popen`, its pid kept, and stopped by that pid
(SIGTERM, a bounded wait, then SIGKILL); `ControlPlane.stop` is idempotent and also
cleans up after a start that failed half-way. etcd, kube-apiserver and kube-scheduler
get PR_SET_PDEATHSIG (SIGKILL), so a test run killed outright leaves none of them behind
(start the control plane from a thread that outlives it: the main thread, as pytest
does); our service is started by tests/harness/service.py, which does not set it. Every wait is a
bounded poll; a timeout raises `ControlPlaneError` naming the process's log and its
last lines. One log file per process: `ControlPlane.log_paths()`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import datetime
import hashlib
import io
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar
from unittest import mock
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from extender.policy import scheduler_config as sc
from tests.harness.gate import TcpGate
from tests.harness.loopback import LOCALHOST, free_port, wait_until, wait_until_logged
from tests.harness.service import Service, die_with_parent
from tests.harness.workers import file_lock

JSON = dict[str, Any]
T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
#: The script that unpacks the Kubernetes binaries kept beside the project.
UNPACK = REPO.parent / "shared" / "k8s" / "unpack.sh"

SCHEDULER_NAME = "decice_sched"
ADMIN_USER = "admin"
SCHEDULER_USER = "system:kube-scheduler"
EXTENDER_USER = "decice-extender"
REBALANCER_USER = "decice-rebalancer"
#: The scheduler's Lease, as `decice-extender scheduler-config --full` prints it.
LEASE_NAMESPACE = sc.DEFAULT_LEASE_NAMESPACE
LEASE_NAME = sc.DEFAULT_LEASE_NAME
#: The label every fake node carries (up.sh's), and the annotation holding its spec.
FAKE_LABEL = "decice.io/fake"
_FAKE_SPEC = "decice.io/fake-spec"
FIELD_MANAGER = "decice-e2e"

#: What we add to kube-apiserver beyond up.sh: no not-ready taint on a new Node (see
#: the module docstring), no pprof handlers.
APISERVER_EXTRA_ARGS = ("--disable-admission-plugins=TaintNodesByCondition", "--profiling=false")


_POLL = 0.05  # seconds between two checks of a readiness or API condition
_ADDRESS_IN_USE = "address already in use"
#: Seconds the API server and etcd get to exit on SIGTERM before SIGKILL. The API server
#: exits in about 1 s, but now and then its shutdown hangs (on its storage stats) until
#: killed: no test reads anything of a control plane being stopped, and its data is temporary.
_STOP_GRACE = 3.0


class ControlPlaneError(RuntimeError):
    """A process of the control plane did not start, or a bounded wait timed out."""


class Unavailable(RuntimeError):
    """The binaries are not there; str() is the one line to skip with."""


def extender_rbac() -> list[JSON]:
    """The extender's RBAC as the Helm chart gives it (defaults: watchPods and requeue
    on), rendered from deploy/helm/decice-extender/templates/rbac.yaml: its ClusterRole
    `decice-extender-extender` and the ClusterRoleBinding of it, bound here to the user
    `decice-extender` instead of the chart's ServiceAccount."""
    from tests.deploy.chart import render_mod

    rendered = render_mod.render_chart()
    docs = [yaml.safe_load(doc) for doc in render_mod.documents(rendered)]
    name = f"{render_mod.RELEASE}-extender"
    role = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name]
    binding = [
        d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == name
    ]
    if len(role) != 1 or len(binding) != 1:
        raise ControlPlaneError(f"the chart renders no ClusterRole + ClusterRoleBinding {name}")
    user = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": EXTENDER_USER}
    binding[0]["subjects"] = [user]
    return [role[0], binding[0]]


def rebalancer_rbac() -> list[JSON]:
    """The rebalancer's RBAC as the Helm chart gives it, rendered from
    deploy/helm/decice-extender/templates/rebalancer-rbac.yaml with `rebalancer.enabled`:
    its ClusterRole (pods, pods/eviction, PodDisruptionBudgets, nodes, Events) and the
    Role on its Lease in the release namespace, each bound to the user
    `decice-rebalancer` instead of the chart's ServiceAccount."""
    from tests.deploy.chart import render_mod

    rendered = render_mod.render_chart({"rebalancer": {"enabled": True}})
    docs = [yaml.safe_load(doc) for doc in render_mod.documents(rendered)]
    name = f"{render_mod.RELEASE}-rebalancer"
    kinds = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    found = [
        d
        for d in docs
        if d["kind"] in kinds and d["metadata"]["name"] in (name, f"{name}-leader-election")
    ]
    if len(found) != 4:
        raise ControlPlaneError(f"the chart renders no rebalancer RBAC {name}")
    user = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": REBALANCER_USER}
    for doc in found:
        if doc["kind"].endswith("Binding"):
            doc["subjects"] = [user]
    return found


# --- binaries -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Binaries:
    apiserver: Path
    scheduler: Path
    etcd: Path
    kubectl: Path | None = None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@cache
def _unpacked() -> Path:
    """The folder unpack.sh prints (it unpacks once, then only checks the checksums). One
    process at a time: the suite's xdist workers would otherwise each unpack on a fresh
    machine (unpack.sh is safe run concurrently, but each would decompress it all)."""
    try:
        with file_lock(Path(tempfile.gettempdir()) / f"decice-k8s-unpack-{os.getuid()}.lock"):
            done = subprocess.run(
                [str(UNPACK)], capture_output=True, text=True, timeout=300, check=False
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"real control plane not available: {UNPACK} failed: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(
            f"real control plane not available: {UNPACK} exited {done.returncode}: {last}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def _k8s_folder() -> Path:
    given = os.environ.get("DECICE_K8S_BIN", "").strip()
    if given:
        folder = Path(given)
        for name in ("kube-apiserver", "kube-scheduler"):
            if not _executable(folder / name):
                raise Unavailable(
                    f"real control plane not available: DECICE_K8S_BIN={given} has no "
                    f"executable {name}"
                )
        return folder
    if not UNPACK.is_file():
        raise Unavailable(
            "real control plane not available: no DECICE_K8S_BIN and no "
            f"{UNPACK} (see tests/harness/controlplane.py)"
        )
    return _unpacked()


def _etcd() -> Path:
    given = os.environ.get("DECICE_ETCD", "").strip()
    if given:
        if not _executable(Path(given)):
            raise Unavailable(
                f"real control plane not available: DECICE_ETCD={given} is no executable"
            )
        return Path(given)
    found = shutil.which("etcd")
    if found is None:
        raise Unavailable(
            "real control plane not available: no etcd on PATH: apt-get install etcd-server "
            "(or set DECICE_ETCD)"
        )
    return Path(found)


def find_binaries() -> Binaries:
    """kube-apiserver, kube-scheduler and etcd; `Unavailable` (one line) when missing."""
    etcd = _etcd()  # first: it costs nothing, unpack.sh checks checksums
    folder = _k8s_folder()
    for name in ("kube-apiserver", "kube-scheduler"):
        if not _executable(folder / name):
            raise Unavailable(f"real control plane not available: no {name} in {folder}")
    kubectl = folder / "kubectl"
    return Binaries(
        apiserver=folder / "kube-apiserver",
        scheduler=folder / "kube-scheduler",
        etcd=etcd,
        kubectl=kubectl if _executable(kubectl) else None,
    )


def unavailable_reason() -> str | None:
    """None when a control plane can start here, else the one line saying why not."""
    try:
        find_binaries()
    except Unavailable as exc:
        return str(exc)
    return None


# --- processes ------------------------------------------------------------------------------


def tail(path: Path, lines: int = 25) -> str:
    """The last `lines` lines of a log file ("" when there is none)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16_384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Process:
    """One child process: started with Popen, its output in one log file, stopped by pid."""

    def __init__(self, name: str, argv: Sequence[str], log: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._log_from = 0  # where this start's output begins (a log is appended to)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> Process:
        with self.log.open("ab") as out:
            out.write(f"--- {self.name}: {' '.join(self.argv)}\n".encode())
            out.flush()
            self._log_from = out.tell()
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # only prctl(2): no locks, no imports
            )
        return self

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exited(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM to our pid, wait at most `timeout` s, then SIGKILL. Idempotent."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            # poll() has not reaped it, so the pid is still this child's.
            os.kill(proc.pid, signal.SIGTERM)
            try:
                return proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                return proc.wait(timeout=10)
        return proc.returncode

    def describe(self) -> str:
        return f"{self.name} (pid {self.pid}), log {self.log}:\n{tail(self.log)}"

    def output(self) -> str:
        """What this start of the process wrote so far (its log is appended to)."""
        with self.log.open("rb") as f:
            f.seek(self._log_from)
            return f.read().decode(errors="replace")

    def wait_ready(self, probe: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `probe` until it holds; ControlPlaneError (with the log) on exit or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.exited()
            if code is not None:
                raise ControlPlaneError(
                    f"{self.name} exited with {code} before {what}: {self.describe()}"
                )
            if probe():
                return
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"timed out after {timeout} s waiting until {what}: {self.describe()}"
                )
            time.sleep(_POLL)

    def port_taken(self) -> bool:
        """Did it exit because its port was taken? (Only this start's output counts.)"""
        if self.exited() is None:
            return False
        with self.log.open("rb") as f:
            f.seek(self._log_from)
            return _ADDRESS_IN_USE in f.read().decode(errors="replace").lower()


def _ok(client: httpx.Client, url: str) -> bool:
    """A readiness probe: does `url` answer 200 (within 2 s)?"""
    try:
        return client.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _start_until_ready(
    name: str,
    argv: Callable[[], list[str]],
    log: Path,
    ready: Callable[[], bool],
    timeout: float,
    what: str,
    attempts: int = 3,
) -> Process:
    """Start a process and wait until `ready()`. free_port() only says a port was free a
    moment ago: when the process exits because its port was taken meanwhile, `argv()`
    (which picks new ports) runs again, at most `attempts` times. On failure the process
    is stopped and ControlPlaneError (with its log) raised."""
    for attempt in range(1, attempts + 1):
        proc = Process(name, argv(), log).start()
        try:
            proc.wait_ready(ready, timeout, what)
            return proc
        except ControlPlaneError:
            proc.stop()
            if attempt == attempts or not proc.port_taken():
                raise
    raise AssertionError("unreachable")


# --- the API client -------------------------------------------------------------------------


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body

    @property
    def reason(self) -> str:
        with contextlib.suppress(ValueError):
            return str(orjson.loads(self.body).get("reason", ""))
        return ""


@dataclass(frozen=True, slots=True)
class FakeNode:
    """A Node object with no kubelet behind it, as up.sh makes them."""

    name: str
    cores: int = 4
    memory_gi: int = 16
    pods: int = 110
    zone: str = "zone-1"
    labels: Mapping[str, str] = field(default_factory=dict)

    def fingerprint(self) -> str:
        spec = [self.cores, self.memory_gi, self.pods, self.zone, sorted(self.labels.items())]
        return hashlib.sha256(orjson.dumps(spec)).hexdigest()[:16]

    def manifest(self, now: str) -> JSON:
        """The Node with its status (allocatable, Ready, InternalIP): one POST makes it."""
        labels = {
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": self.zone,
            **self.labels,
            # Last, never overridden: Kube.ensure_nodes and remove_nodes select by them.
            "kubernetes.io/hostname": self.name,
            FAKE_LABEL: "true",
        }
        resources = {
            "cpu": str(self.cores),
            "memory": f"{self.memory_gi}Gi",
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        node_info = dict.fromkeys(
            ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage"), ""
        )
        node_info.update(
            kubeletVersion="fake",
            architecture="amd64",
            operatingSystem="linux",
            containerRuntimeVersion="",
            kubeProxyVersion="",
        )
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {_FAKE_SPEC: self.fingerprint()},
            },
            "spec": {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "fake node, no kubelet",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": LOCALHOST},
                    {"type": "Hostname", "address": self.name},
                ],
                "nodeInfo": node_info,
            },
        }


def fake_nodes(
    count: int,
    *,
    start: int = 1,
    prefix: str = "node-",
    cores: int | Callable[[int], int] | None = None,
    labels: Mapping[str, str] | Callable[[int], Mapping[str, str]] | None = None,
    zones: int = 2,
) -> list[FakeNode]:
    """node-<start>..node-<start+count-1> as up.sh makes them: zones zone-1, zone-2, ...
    in turn, 4 or 8 cores in turn (odd numbers 4), 4Gi of memory per core, 110 pods.
    `cores` and `labels` (added to the standard ones) may be functions of the number."""
    nodes = []
    for i in range(start, start + count):
        big = (i - 1) % 2
        n_cores = cores(i) if callable(cores) else cores if cores is not None else 4 * (1 + big)
        extra = labels(i) if callable(labels) else labels or {}
        nodes.append(
            FakeNode(
                name=f"{prefix}{i}",
                cores=n_cores,
                memory_gi=4 * n_cores,
                zone=f"zone-{(i - 1) % zones + 1}",
                labels=dict(extra),
            )
        )
    return nodes


def pod_manifest(
    name: str,
    *,
    scheduler_name: str = SCHEDULER_NAME,
    cpu: str | None = "100m",
    memory: str | None = "64Mi",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class_name: str | None = None,
    priority: int | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    node_name: str | None = None,
    containers: int = 1,
) -> JSON:
    """A pod for the scheduler: `containers` pause containers each requesting cpu/memory.

    Priority goes through a PriorityClass (`Kube.priority_class`): the Priority admission
    plugin refuses (403) a `priority` that differs from the value it computes from
    `priority_class_name` (0 without one). terminationGracePeriodSeconds is 0, so a
    deleted or evicted pod goes at once: no kubelet would ever confirm it."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: JSON = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": f"c{i}",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests} if requests else {},
            }
            for i in range(containers)
        ],
    }
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if priority is not None:
        spec["priority"] = priority
    if node_name is not None:
        spec["nodeName"] = node_name
    metadata: JSON = {"name": name, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_references:
        metadata["ownerReferences"] = [dict(o) for o in owner_references]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An Event about a pod, from either Events API (the same object in both)."""

    api: Literal["v1", "events.k8s.io/v1"]
    name: str
    uid: str
    type: str
    reason: str
    message: str
    reporter: str
    count: int
    raw: JSON

    @staticmethod
    def from_core(raw: JSON) -> PodEvent:
        source = raw.get("source") or {}
        series = raw.get("series") or {}
        return PodEvent(
            api="v1",
            name=raw["metadata"]["name"],
            uid=raw["metadata"]["uid"],
            type=raw.get("type", ""),
            reason=raw.get("reason", ""),
            message=raw.get("message", ""),
            reporter=raw.get("reportingComponent") or source.get("component", ""),
            count=int(series.get("count") or raw.get("count") or 1),
            raw=raw,
        )

    @staticmethod
    def from_events_v1(raw: JSON) -> PodEvent:
        series = raw.get("series") or {}
        return PodEvent(
            api="events.k8s.io/v1",
            name=raw["metadata"]["name"],
            uid=raw["metadata"]["uid"],
            type=raw.get("type", ""),
            reason=raw.get("reason", ""),
            message=raw.get("note", ""),
            reporter=raw.get("reportingController", ""),
            count=int(series.get("count") or raw.get("deprecatedCount") or 1),
            raw=raw,
        )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_time(e: PodEvent) -> tuple[str, str]:
    """Sort key of an Event: when it happened (either API's field), then its name."""
    r = e.raw
    stamp = (
        r.get("eventTime")
        or r.get("lastTimestamp")
        or r.get("deprecatedLastTimestamp")
        or r["metadata"].get("creationTimestamp", "")
    )
    return str(stamp), e.name


class Kube:
    """A small synchronous client of the API server: one keep-alive httpx pool, bulk calls
    sent by `workers` threads. Errors raise `ApiError`."""

    def __init__(self, server: str, token: str, ca_file: Path, *, workers: int = 16) -> None:
        self.server = server
        self.workers = workers
        self._http = httpx.Client(
            base_url=server,
            verify=ssl.create_default_context(cafile=str(ca_file)),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=httpx.Timeout(30.0),
            limits=httpx.Limits(max_connections=workers, max_keepalive_connections=workers),
        )
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    def close(self) -> None:
        self._http.close()

    # -- plain requests -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        ok: Iterable[int] = (),
    ) -> JSON:
        """One call; a 2xx (or a status in `ok`) answers the decoded body, else ApiError."""
        headers = {"Content-Type": content_type} if body is not None else {}
        content = orjson.dumps(body) if body is not None else None
        resp = self._http.request(method, path, content=content, params=params, headers=headers)
        if not (200 <= resp.status_code < 300 or resp.status_code in set(ok)):
            raise ApiError(method, path, resp.status_code, resp.text)
        if not resp.content:
            return {}
        decoded: JSON = orjson.loads(resp.content)
        return decoded

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> JSON:
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Any) -> JSON:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: Any = None, *, missing_ok: bool = True) -> JSON:
        return self.request("DELETE", path, body, ok=(404,) if missing_ok else ())

    def text(self, path: str) -> str:
        resp = self._http.get(path, headers={"Accept": "*/*"})
        if resp.status_code != 200:
            raise ApiError("GET", path, resp.status_code, resp.text)
        return resp.text

    def concurrently(self, fn: Callable[[T], JSON], items: Sequence[T]) -> list[JSON]:
        """fn over items on `workers` threads (one pool of connections), in input order."""
        if len(items) <= 1:
            return [fn(item) for item in items]
        with concurrent.futures.ThreadPoolExecutor(min(self.workers, len(items))) as pool:
            return list(pool.map(fn, items))

    # -- manifests ------------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from discovery (cached)."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for res in self.get(base)["resources"]:
                if "/" not in res["name"]:
                    self._resources[(api_version, res["kind"])] = (
                        res["name"],
                        bool(res["namespaced"]),
                    )
            if key not in self._resources:
                raise KeyError(f"the API server serves no kind {kind} in {api_version}")
        return self._resources[key]

    def path_of(
        self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None
    ) -> str:
        """The REST path of a kind's collection, or of one object when `name` is given."""
        plural, namespaced = self._resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            if not namespace:
                raise ValueError(f"{kind} is namespaced: give a namespace")
            base += f"/namespaces/{namespace}"
        path = f"{base}/{plural}"
        return f"{path}/{name}" if name else path

    def _manifest_path(self, manifest: Mapping[str, Any], namespace: str | None = None) -> str:
        meta = manifest["metadata"]
        return self.path_of(
            manifest["apiVersion"],
            manifest["kind"],
            meta["name"],
            meta.get("namespace") or namespace,
        )

    def apply(self, manifest: Mapping[str, Any], namespace: str | None = None) -> JSON:
        """Server-side apply (created or updated, forced): any kind the server serves."""
        return self.request(
            "PATCH",
            self._manifest_path(manifest, namespace),
            manifest,
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
            content_type="application/apply-patch+yaml",
        )

    def apply_all(
        self, manifests: Iterable[Mapping[str, Any]], namespace: str | None = None
    ) -> None:
        for manifest in manifests:
            self.apply(manifest, namespace)

    def patch_status(
        self, manifest: Mapping[str, Any], status: Mapping[str, Any], namespace: str | None = None
    ) -> JSON:
        """Merge `status` into an object's status subresource (`manifest` names the object)."""
        path = self._manifest_path(manifest, namespace) + "/status"
        return self.merge_patch(path, {"status": dict(status)})

    def set_pdb_status(
        self,
        namespace: str,
        name: str,
        *,
        disruptions_allowed: int,
        current_healthy: int,
        desired_healthy: int,
        expected_pods: int,
    ) -> JSON:
        """Write a PodDisruptionBudget's status, as the disruption controller would."""
        pdb = self.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
        status = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": current_healthy,
            "desiredHealthy": desired_healthy,
            "expectedPods": expected_pods,
        }
        return self.patch_status(pdb, status)

    def priority_class(
        self, name: str, value: int, *, preemption_policy: str = "PreemptLowerPriority"
    ) -> JSON:
        return self.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": preemption_policy,
            }
        )

    # -- namespaces, pods, events, leases -------------------------------------------------

    def create_namespace(self, name: str, *, labels: Mapping[str, str] | None = None) -> None:
        """The namespace and its `default` ServiceAccount (no controller makes it here)."""
        meta = {"name": name, "labels": dict(labels or {})}
        self.request("POST", "/api/v1/namespaces", {"metadata": meta}, ok=(409,))
        self.request(
            "POST",
            f"/api/v1/namespaces/{name}/serviceaccounts",
            {"metadata": {"name": "default"}},
            ok=(409,),
        )

    def delete_namespace(self, name: str) -> None:
        """Delete its pods at once (grace 0), then the namespace (it stays Terminating: no
        namespace controller runs)."""
        self.delete_pods(name)
        self.delete(f"/api/v1/namespaces/{name}")

    def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> JSON:
        return self.post(f"/api/v1/namespaces/{namespace}/pods", pod)

    def create_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> list[JSON]:
        """Create pods concurrently; the created objects, in input order."""
        return self.concurrently(lambda pod: self.create_pod(namespace, pod), pods)

    def pod(self, namespace: str, name: str) -> JSON:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def pods(self, namespace: str | None = None, label_selector: str | None = None) -> list[JSON]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        params = {"labelSelector": label_selector} if label_selector else None
        items: list[JSON] = self.get(path, params)["items"]
        return items

    def delete_pods(self, namespace: str, names: Sequence[str] | None = None) -> None:
        """Delete pods now (grace period 0: a bound pod has no kubelet to confirm it)."""
        now = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        if names is None:
            self.delete(f"/api/v1/namespaces/{namespace}/pods", now)
            return
        self.concurrently(
            lambda name: self.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", now),
            list(names),
        )

    def mark_running(self, namespace: str, names: Sequence[str]) -> list[JSON]:
        """Report pods Running and Ready through their status subresource, as a kubelet
        would. A pod no kubelet runs stays Pending, and the Eviction API lets a Pending pod
        go without looking at its PodDisruptionBudget: a PDB story needs this first."""
        now = _now()
        status = {
            "phase": "Running",
            "podIP": LOCALHOST,
            "startTime": now,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
        }
        return self.concurrently(
            lambda name: self.merge_patch(
                f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": status}
            ),
            list(names),
        )

    def resize_pod(self, namespace: str, name: str, container: str, cpu: str) -> JSON:
        """An in-place resize of one container's CPU request (and limit, when it has one)
        through the pods/resize subresource, as `kubectl patch --subresource resize` sends
        it (a strategic merge patch). With no kubelet, the spec changes and nothing reports
        the resize done: the pod's status has no `containerStatuses`."""
        pod = self.pod(namespace, name)
        [found] = [c for c in pod["spec"]["containers"] if c["name"] == container]
        resources: JSON = {"requests": {"cpu": cpu}}
        if "cpu" in (found.get("resources") or {}).get("limits", {}):
            resources["limits"] = {"cpu": cpu}
        body = {"spec": {"containers": [{"name": container, "resources": resources}]}}
        return self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/resize",
            body,
            content_type="application/strategic-merge-patch+json",
        )

    def pod_events(self, namespace: str, name: str) -> list[PodEvent]:
        """Events regarding pod `name`, from core/v1 and events.k8s.io/v1 (one per object:
        the two APIs show the same Events), oldest first."""
        seen: dict[str, PodEvent] = {}
        core = self.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        for raw in core:
            obj = raw.get("involvedObject") or {}
            if obj.get("kind") == "Pod" and obj.get("name") == name:
                event = PodEvent.from_core(raw)
                seen[event.uid] = event
        new = self.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        for raw in new:
            obj = raw.get("regarding") or {}
            if obj.get("kind") == "Pod" and obj.get("name") == name:
                event = PodEvent.from_events_v1(raw)
                seen.setdefault(event.uid, event)

        return sorted(seen.values(), key=_event_time)

    def events_by_pod(self, namespace: str) -> dict[str, list[PodEvent]]:
        """Every Event regarding a pod of the namespace, by pod name, oldest first: ONE
        list (core/v1 shows the Events written through events.k8s.io/v1 as well), so a
        burst of 200 pods costs one call, not 400 (`pod_events` lists twice per pod)."""
        by_pod: dict[str, list[PodEvent]] = {}
        for raw in self.get(f"/api/v1/namespaces/{namespace}/events")["items"]:
            obj = raw.get("involvedObject") or {}
            if obj.get("kind") == "Pod" and obj.get("name"):
                by_pod.setdefault(str(obj["name"]), []).append(PodEvent.from_core(raw))
        for events in by_pod.values():
            events.sort(key=_event_time)
        return by_pod

    def nodes_of(self, namespace: str) -> dict[str, str | None]:
        """pod name -> spec.nodeName (None while unbound), from one list."""
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName") or None for p in self.pods(namespace)
        }

    def wait_all_bound(
        self, namespace: str, names: Iterable[str], timeout: float
    ) -> dict[str, str]:
        """pod name -> node once every one of `names` has spec.nodeName (one list a poll)."""
        wanted = set(names)
        last: dict[str, str | None] = {}

        def check() -> bool:
            last.clear()
            last.update(self.nodes_of(namespace))
            return all(last.get(name) for name in wanted)

        try:
            self.wait_until(check, timeout, f"{len(wanted)} pods of {namespace} are bound")
        except AssertionError as exc:
            unbound = sorted(n for n in wanted if not last.get(n))
            raise AssertionError(f"{exc}; {len(unbound)} unbound: {unbound[:10]}") from None
        return {name: str(last[name]) for name in wanted}

    def lease(self, namespace: str, name: str) -> JSON | None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        found = self.request("GET", path, ok=(404,))
        return found if found.get("kind") == "Lease" else None

    # -- nodes ----------------------------------------------------------------------------

    def nodes(self, label_selector: str | None = None) -> list[JSON]:
        params = {"labelSelector": label_selector} if label_selector else None
        items: list[JSON] = self.get("/api/v1/nodes", params)["items"]
        return items

    def add_nodes(self, nodes: Sequence[FakeNode]) -> float:
        """Create fake nodes (one POST each, status included, concurrently); seconds taken."""
        now = _now()
        began = time.perf_counter()
        self.concurrently(lambda n: self.post("/api/v1/nodes", n.manifest(now)), list(nodes))
        return time.perf_counter() - began

    def remove_nodes(self, names: Iterable[str]) -> float:
        """Delete nodes by name (a missing one is fine); seconds taken. One DELETE of the
        collection per 100 names (label kubernetes.io/hostname, which every fake node
        carries), concurrently: 1,000 nodes in 0.5-0.65 s (one DELETE each: 0.5-1.2 s)."""
        began = time.perf_counter()
        todo = sorted(set(names))
        chunks = [todo[i : i + 100] for i in range(0, len(todo), 100)]

        def delete(chunk: list[str]) -> JSON:
            selector = f"kubernetes.io/hostname in ({','.join(chunk)})"
            return self.request("DELETE", "/api/v1/nodes", params={"labelSelector": selector})

        self.concurrently(delete, chunks)
        return time.perf_counter() - began

    def ensure_nodes(self, nodes: Sequence[FakeNode]) -> float:
        """Make the fake nodes exactly `nodes`: create what is missing, re-create what
        differs, delete other fake nodes (label decice.io/fake). Seconds taken."""
        began = time.perf_counter()
        want = {n.name: n for n in nodes}
        have = {
            n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(_FAKE_SPEC)
            for n in self.nodes(f"{FAKE_LABEL}=true")
        }
        stale = [
            name for name, fp in have.items() if name not in want or fp != want[name].fingerprint()
        ]
        self.remove_nodes(stale)
        self.add_nodes([n for name, n in want.items() if name not in have or name in stale])
        return time.perf_counter() - began

    # -- waiting --------------------------------------------------------------------------

    def wait_until(
        self, condition: Callable[[], object], timeout: float, what: str = "the condition holds"
    ) -> None:
        """Poll `condition` every 50 ms until truthy; AssertionError naming `what` after
        `timeout` s (a ceiling for a stuck test, not a measurement)."""
        wait_until(condition, timeout, what, interval=_POLL)

    def wait_for_pod(
        self,
        namespace: str,
        name: str,
        condition: Callable[[JSON], object],
        timeout: float,
        what: str = "the pod matches",
    ) -> JSON:
        """The pod as soon as `condition(pod)` holds (bounded polling)."""
        last: list[JSON] = []

        def check() -> bool:
            last[:] = [self.pod(namespace, name)]
            return bool(condition(last[0]))

        self.wait_until(check, timeout, f"{namespace}/{name}: {what}")
        return last[0]

    def wait_bound(self, namespace: str, name: str, timeout: float) -> str:
        """The node the pod was bound to (spec.nodeName), once it is."""
        pod = self.wait_for_pod(
            namespace, name, lambda p: p["spec"].get("nodeName"), timeout, "bound to a node"
        )
        node: str = pod["spec"]["nodeName"]
        return node

    def wait_event(self, namespace: str, name: str, reason: str, timeout: float) -> PodEvent:
        """The first Event with `reason` regarding the pod, once there is one."""
        found: list[PodEvent] = []

        def check() -> bool:
            found[:] = [e for e in self.pod_events(namespace, name) if e.reason == reason]
            return bool(found)

        self.wait_until(check, timeout, f"an Event {reason} regards pod {namespace}/{name}")
        return found[0]


# --- the control plane ----------------------------------------------------------------------


def _kubeconfig(server: str, ca: Path, user: str, token: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": "e2e",
        },
        sort_keys=False,
    )


def _cli(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """`decice-extender <argv>` in this process, with `env` added to the environment for
    the call (the policy's overrides: PROMETHEUS_URL, ...); its stdout, ControlPlaneError
    on failure."""
    from extender.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, dict(env or {})),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    if code != 0:
        raise ControlPlaneError(f"decice-extender {' '.join(argv)} exited {code}: {err.getvalue()}")
    return out.getvalue()


FEATURE_GATES_ENV = "DECICE_SCHEDULER_FEATURE_GATES"
"""kube-scheduler's --feature-gates for a whole run (`A=true,B=false`): the e2e suite
with a gate turned the way a later release will ship it."""


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` (kube-scheduler's --feature-gates syntax) as a mapping."""
    gates: dict[str, bool] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise ValueError(f"{FEATURE_GATES_ENV}: {part!r} is not NAME=true|false")
        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def feature_gates_from_env() -> dict[str, bool]:
    return parse_feature_gates(os.environ.get(FEATURE_GATES_ENV, ""))


def feature_gates_flag(gates: Mapping[str, bool]) -> list[str]:
    """`--feature-gates=...` for kube-scheduler (nothing when no gate is set)."""
    if not gates:
        return []
    joined = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))
    return [f"--feature-gates={joined}"]


def with_port(url: str, port: int) -> str:
    """`url` with its port replaced (scheme, host and path kept)."""
    parts = urlsplit(url)
    host = parts.hostname or LOCALHOST
    host = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler, + our service) on 127.0.0.1; see the module
    docstring. `workdir` holds pki/, the kubeconfigs, the configs and the logs."""

    def __init__(
        self,
        workdir: Path,
        *,
        binaries: Binaries | None = None,
        apiserver_args: Sequence[str] = (),
        scheduler_verbosity: int = 2,
        scheduler_feature_gates: Mapping[str, bool] | None = None,
    ) -> None:
        self.workdir = workdir
        self.binaries = binaries
        self.apiserver_args = [*APISERVER_EXTRA_ARGS, *apiserver_args]
        self.scheduler_verbosity = scheduler_verbosity
        self.scheduler_feature_gates: dict[str, bool] = (
            dict(scheduler_feature_gates)
            if scheduler_feature_gates is not None
            else feature_gates_from_env()
        )
        """kube-scheduler's --feature-gates for every start that names none (default:
        $DECICE_SCHEDULER_FEATURE_GATES, e.g. `SchedulerAsyncAPICalls=true`)."""
        self.pki = workdir / "pki"
        self.ca_file = self.pki / "ca.crt"
        self.tokens: dict[str, str] = {}
        self.etcd_url = ""
        self.apiserver_port = 0
        self.scheduler_port = 0
        self.started_in: float | None = None
        self._etcd: Process | None = None
        self._apiserver: Process | None = None
        self._scheduler: Process | None = None
        self._scheduler_config: Path | None = None
        self._extender: Service | None = None
        self._rebalancer: Service | None = None
        self._kube: Kube | None = None
        self._logs: dict[str, Path] = {}
        self._scheduler_starts = 0
        self._scheduler_gates: dict[str, bool] = {}
        self._api_gate: TcpGate | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> ControlPlane:
        """PKI, etcd, kube-apiserver until /readyz, the RBAC. Stops what it started if a
        step fails."""
        began = time.perf_counter()
        try:
            if self.binaries is None:
                self.binaries = find_binaries()
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._write_pki()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._bootstrap()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.perf_counter() - began
        return self

    def stop(self) -> None:
        """Stop our service, the scheduler, the API server and etcd, each by its pid.
        Idempotent; safe after a start that failed half-way. Every step runs even when
        one before it fails (the first failure is raised at the end)."""
        failures: list[BaseException] = []

        def attempt(step: Callable[[], object]) -> None:
            try:
                step()
            except Exception as exc:  # keep stopping the rest
                failures.append(exc)

        attempt(self.stop_rebalancer)
        attempt(self.stop_extender)
        attempt(self.stop_scheduler)
        if self._kube is not None:
            attempt(self._kube.close)
            self._kube = None
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                attempt(partial(proc.stop, timeout=_STOP_GRACE))
        if failures:
            raise failures[0]

    # -- where things are -------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://{LOCALHOST}:{self.apiserver_port}"

    def kubeconfig(self, user: str = ADMIN_USER) -> Path:
        """The kubeconfig of `user` (admin, system:kube-scheduler, decice-extender)."""
        return self.workdir / f"{user.replace(':', '-')}.kubeconfig"

    @property
    def kube(self) -> Kube:
        """The admin (system:masters) client."""
        if self._kube is None:
            self._kube = Kube(self.server, self.tokens[ADMIN_USER], self.ca_file)
        return self._kube

    def client_for(self, user: str) -> Kube:
        """A client authenticated as `user` (close it when done)."""
        return Kube(self.server, self.tokens[user], self.ca_file)

    def log_paths(self) -> dict[str, Path]:
        """One log file per process started so far: etcd, kube-apiserver, kube-scheduler,
        extender (our service's stderr), rebalancer."""
        paths = dict(self._logs)
        if self._extender is not None:
            paths["extender"] = self._extender.stderr_path
        if self._rebalancer is not None:
            paths["rebalancer"] = self._rebalancer.stderr_path
        return paths

    def pids(self) -> dict[str, int]:
        """The pid of every process of ours that is running now."""
        procs = (self._etcd, self._apiserver, self._scheduler)
        out = {p.name: p.pid for p in procs if p is not None and p.pid is not None and p.alive()}
        if self._extender is not None and self._extender.alive():
            out["extender"] = self._extender.pid
        return out

    # -- start-up steps ---------------------------------------------------------------------

    def _write_pki(self) -> None:
        self.pki.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="decice-e2e")
        server = ca.issue_cert(
            LOCALHOST,
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.96.0.1",
            common_name="kube-apiserver",
        )
        ca.cert_pem.write_to_path(str(self.ca_file))
        server.cert_chain_pems[0].write_to_path(str(self.pki / "apiserver.crt"))
        server.private_key_pem.write_to_path(str(self.pki / "apiserver.key"))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.pki / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (self.pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.tokens = {
            u: secrets.token_hex(16)
            for u in (ADMIN_USER, SCHEDULER_USER, EXTENDER_USER, REBALANCER_USER)
        }
        groups = {ADMIN_USER: "system:masters"}
        lines = [
            f'{token},{user},{user}-uid,"{groups.get(user, "")}"'
            for user, token in self.tokens.items()
        ]
        (self.pki / "tokens.csv").write_text("\n".join(lines) + "\n")

    def _log(self, name: str) -> Path:
        path = self.workdir / f"{name}.log"
        self._logs[name] = path
        return path

    def _start_etcd(self, timeout: float) -> None:
        assert self.binaries is not None
        etcd, data = self.binaries.etcd, self.workdir / "etcd-data"

        def argv() -> list[str]:
            shutil.rmtree(data, ignore_errors=True)  # a previous attempt's
            self.etcd_url = f"http://{LOCALHOST}:{free_port()}"
            peer = f"http://{LOCALHOST}:{free_port()}"
            return [
                str(etcd),
                "--name=e2e",
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--log-level=warn",
            ]

        with httpx.Client() as http:
            self._etcd = _start_until_ready(
                "etcd",
                argv,
                self._log("etcd"),
                lambda: _ok(http, f"{self.etcd_url}/health"),
                timeout,
                "etcd answers /health",
            )

    def _start_apiserver(self, timeout: float) -> None:
        assert self.binaries is not None
        apiserver, pki = self.binaries.apiserver, self.pki

        def argv() -> list[str]:
            self.apiserver_port = free_port()
            return [
                str(apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={LOCALHOST}",
                f"--advertise-address={LOCALHOST}",
                f"--secure-port={self.apiserver_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_file}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                f"--requestheader-client-ca-file={self.ca_file}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                *self.apiserver_args,
            ]

        headers = {"Authorization": f"Bearer {self.tokens[ADMIN_USER]}"}
        with httpx.Client(
            verify=ssl.create_default_context(cafile=str(self.ca_file)), headers=headers
        ) as http:
            self._apiserver = _start_until_ready(
                "kube-apiserver",
                argv,
                self._log("kube-apiserver"),
                lambda: _ok(http, f"{self.server}/readyz"),
                timeout,
                "kube-apiserver answers /readyz",
            )

    def _bootstrap(self) -> None:
        """The kubeconfigs, the scheduler's Lease namespace and RBAC, the extender's RBAC."""
        for user, token in self.tokens.items():
            self.kubeconfig(user).write_text(_kubeconfig(self.server, self.ca_file, user, token))
        self.grant_lease(LEASE_NAMESPACE, LEASE_NAME)
        self.kube.apply_all(extender_rbac())
        self.kube.apply_all(rebalancer_rbac())  # its Lease's Role: in LEASE_NAMESPACE

    def grant_lease(self, namespace: str, name: str) -> None:
        """The namespace, and the Role + RoleBinding that
        `decice-extender scheduler-config --rbac --user system:kube-scheduler` prints for
        the Lease namespace/name, applied as printed."""
        self.kube.create_namespace(namespace)
        argv = ["scheduler-config", "--rbac", "--user", SCHEDULER_USER]
        argv += ["--lease-namespace", namespace, "--lease-name", name]
        self.kube.apply_all(doc for doc in yaml.safe_load_all(_cli(argv)) if doc)

    # -- our service ------------------------------------------------------------------------

    @property
    def extender(self) -> Service | None:
        return self._extender

    def start_extender(
        self,
        policy: Mapping[str, Any] | Path,
        *,
        env: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        log_level: str = "info",
        wait_synced: bool = True,
        scheme: str = "http",
        client_ssl: ssl.SSLContext | None = None,
    ) -> Service:
        """`decice-extender serve --config <policy>` as the user decice-extender (KUBECONFIG
        its kubeconfig; `env` adds e.g. PROMETHEUS_URL). Returns once /healthz answers and
        (`wait_synced`) its watches have listed. A Path is read as YAML (config/extender.yaml,
        config/demo.yaml); a mapping is the policy itself (`static_policy`). A policy with
        `server.tls` needs `scheme="https"` and a `client_ssl` context the test's own calls
        go through (trusting its CA; with a client certificate under mutual TLS)."""
        if self._extender is not None:
            raise ControlPlaneError("the extender already runs: stop_extender() first")
        raw = yaml.safe_load(policy.read_text()) if isinstance(policy, Path) else dict(policy)
        full_env = {"KUBECONFIG": str(self.kubeconfig(EXTENDER_USER)), **(env or {})}
        where = workdir or self.workdir
        service = Service(
            raw, where, full_env, scheme=scheme, client_ssl=client_ssl, log_level=log_level
        )
        self._extender = service
        service.start()
        if wait_synced:
            self.wait_extender_synced(service)
        return service

    def wait_extender_synced(self, service: Service, timeout: float = 60.0) -> None:
        """Until every watch our service's /readyz lists has listed (it shows the list's
        resourceVersion) without an error: its node and pod caches are filled, and every
        later change reaches it (the watch resumes from that version). A condition on
        Kubernetes only, whatever the metrics say.

        Not `watching: true`: our informer sets that on a watch's first event, and a real
        API server sends none on a quiet cluster until its first BOOKMARK, about a minute
        later (the fake server in tests/harness/kubeapi.py bookmarks every second)."""

        def synced() -> bool:
            _, body = service.get("/readyz")
            watches = orjson.loads(body).get("watches") or {}
            return all(w.get("resourceVersion") and not w.get("error") for w in watches.values())

        wait_until_logged(
            synced,
            timeout,
            f"the extender's watches have listed (log {service.stderr_path})",
            lambda: service.stderr()[-3000:],
        )

    def kill_extender(self) -> int:
        """SIGKILL our service by its pid (no graceful shutdown: requests in flight are cut
        off) and reap it; the pid it had. `restart_extender` brings it back."""
        service = self._extender
        if service is None or not service.alive():
            raise ControlPlaneError("the extender is not running")
        pid = service.pid
        os.kill(pid, signal.SIGKILL)
        service.wait(10)
        return pid

    def restart_extender(self, timeout: float = 60.0) -> Service:
        """Start our service again after it exited: the same policy file, environment and
        port (the scheduler's config points there), until its watches have listed. The
        log of the run before is kept beside the new one (``*.before-restart``)."""
        service = self._extender
        if service is None or service.alive():
            raise ControlPlaneError("restart_extender: the extender must have exited first")
        port = service.port
        if service.stderr_path.exists():
            shutil.copyfile(service.stderr_path, service.stderr_path.with_suffix(".before-restart"))
        service.start(timeout)
        if service.port != port:
            service.kill()
            raise ControlPlaneError(
                f"the extender's port {port} was taken while it was down; it came back on "
                f"{service.port}, where the scheduler does not call"
            )
        self.wait_extender_synced(service, timeout)
        return service

    def stop_extender(self, timeout: float = 15.0) -> None:
        service, self._extender = self._extender, None
        if service is not None and service.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # then Service.stop killed it
                service.stop(timeout)
        gate, self._api_gate = self._api_gate, None
        if gate is not None:
            gate.close()

    # -- the rebalancer -------------------------------------------------------------------

    @property
    def rebalancer(self) -> Service | None:
        return self._rebalancer

    def start_rebalancer(
        self,
        policy: Mapping[str, Any] | Path,
        *,
        env: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        log_level: str = "info",
        timeout: float = 60.0,
    ) -> Service:
        """`decice-extender rebalance --config <policy>` as the user decice-rebalancer (the
        chart's rebalancer RBAC, `rebalancer_rbac`) in the chart's namespace (POD_NAMESPACE,
        where its Lease is), beside our service; `env` adds e.g. PROMETHEUS_URL. Returns
        once it holds its Lease and its watches have listed (/readyz)."""
        if self._rebalancer is not None:
            raise ControlPlaneError("the rebalancer already runs: stop_rebalancer() first")
        raw = yaml.safe_load(policy.read_text()) if isinstance(policy, Path) else dict(policy)
        full_env = {
            "KUBECONFIG": str(self.kubeconfig(REBALANCER_USER)),
            "POD_NAMESPACE": LEASE_NAMESPACE,
            "POD_NAME": "decice-rebalancer-0",
            **(env or {}),
        }
        where = workdir or self.workdir
        service = Service(raw, where, full_env, log_level=log_level, mode="rebalance")
        self._rebalancer = service
        service.start(timeout)

        def leads() -> bool:
            _, body = service.get("/readyz")
            doc = orjson.loads(body)
            watches = doc.get("watches") or {}
            listed = all(w.get("resourceVersion") for w in watches.values())
            leader = (doc.get("rebalancer") or {}).get("leader") or {}
            return bool(leader.get("leading")) and listed

        wait_until_logged(
            leads,
            timeout,
            f"the rebalancer holds its Lease and has listed (log {service.stderr_path})",
            lambda: service.stderr()[-3000:],
        )
        return service

    def stop_rebalancer(self, timeout: float = 15.0) -> None:
        """SIGTERM (it releases its Lease, so the next one leads at once), bounded."""
        service, self._rebalancer = self._rebalancer, None
        if service is not None and service.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # then Service.stop killed it
                service.stop(timeout)

    @property
    def gate(self) -> TcpGate | None:
        """The API gate `api_gate` made, while it stands."""
        return self._api_gate

    def api_gate(
        self, workdir: Path, *, segment: int | None = None, gap: float = 0.0
    ) -> tuple[TcpGate, Path]:
        """A TCP gate in front of the API server (closed: nothing answers) and a kubeconfig
        of the user decice-extender through it (the same TLS name), for a service started
        before the API server answers it, or (`segment`, `gap`) reading it as across a
        network; closed with the extender (`stop_extender`)."""
        if self._api_gate is not None:
            raise ControlPlaneError("an API gate is open already")
        gate = TcpGate(self.apiserver_port, segment=segment, gap=gap)
        config = yaml.safe_load(self.kubeconfig(EXTENDER_USER).read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = with_port(self.server, gate.port)
        path = workdir / "extender-through-gate.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        self._api_gate = gate
        return gate, path

    def start_extender_before_api(
        self,
        policy: Mapping[str, Any] | Path,
        late: float,
        *,
        env: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        sync_within: float = 5.0,
    ) -> tuple[Service, float]:
        """Our service started while the API server does not answer it: through a closed
        `api_gate`, opened `late` seconds after the service's first list failed (a chart
        rollout or a control-plane restart starts it first). Returns the service and the
        seconds from the gate opening to its node cache synced (/readyz nodeCacheSynced),
        which must come within `sync_within`: a bounded wait, far under the doubling
        back-off's 30 s, for a retry due within a second (extender/cluster/informer.py;
        the schedule itself is tested in tests/cluster/test_informer.py)."""
        where = workdir or self.workdir
        gate, kubeconfig = self.api_gate(where)
        service = self.start_extender(
            policy,
            env={**(env or {}), "KUBECONFIG": str(kubeconfig)},
            workdir=workdir,
            wait_synced=False,
        )
        wait_until(lambda: "first list failed" in service.stderr(), 30, "the first list failed")
        time.sleep(late)  # how late the API server is: the story's delay, not a wait
        gate.open()
        opened = time.monotonic()

        def synced() -> bool:
            _, body = service.get("/readyz")
            return bool(orjson.loads(body).get("nodeCacheSynced"))

        wait_until_logged(
            synced,
            sync_within,
            f"the extender's node cache synced (log {service.stderr_path})",
            lambda: service.stderr()[-3000:],
        )
        learned = time.monotonic() - opened
        self.wait_extender_synced(service)
        return service, learned

    # -- the scheduler ----------------------------------------------------------------------

    def decice_scheduler_config(
        self,
        policy_file: Path,
        service_port: int,
        *,
        percentage_of_nodes_to_score: int | None = None,
        qps: float | None = None,
        env: Mapping[str, str] | None = None,
        weight: int | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> JSON:
        """What `decice-extender scheduler-config --config <policy> --full --host 127.0.0.1`
        (`--weight` when given) prints (`env`: the service's environment), plus only what a
        harness must add: the service's actual port in the urlPrefix, QPS (burst 2x) and
        percentageOfNodesToScore when given, and `overrides` (top-level fields a story sets,
        e.g. podInitialBackoffSeconds); `start_scheduler` adds the scheduler's kubeconfig."""
        argv = ["scheduler-config", "--config", str(policy_file), "--full", "--host", LOCALHOST]
        if weight is not None:
            argv += ["--weight", str(weight)]
        printed = _cli(argv, env)
        config: JSON = yaml.safe_load(printed)
        for extender in config.get("extenders") or []:
            extender["urlPrefix"] = with_port(extender["urlPrefix"], service_port)
        if percentage_of_nodes_to_score is not None:
            config["percentageOfNodesToScore"] = percentage_of_nodes_to_score
        if qps is not None:
            config["clientConnection"] = {"qps": qps, "burst": int(2 * qps)}
        config.update(overrides or {})
        return config

    def start_scheduler_for(
        self,
        service: Service,
        *,
        percentage_of_nodes_to_score: int | None = None,
        qps: float | None = None,
        timeout: float = 60.0,
        weight: int | None = None,
        feature_gates: Mapping[str, bool] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Start kube-scheduler on the config our CLI prints for `service`'s policy (with
        `--weight` when given, `overrides` set on it); the config it runs. `feature_gates`:
        its --feature-gates (None: the control plane's, `scheduler_feature_gates`)."""
        config = self.decice_scheduler_config(
            service.config,
            service.port,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            qps=qps,
            env=service.env,
            weight=weight,
            overrides=overrides,
        )
        self.start_scheduler(config, timeout=timeout, feature_gates=feature_gates)
        return config

    def start_scheduler(
        self,
        config: str | Mapping[str, Any],
        *,
        extender_port: int | None = None,
        timeout: float = 60.0,
        feature_gates: Mapping[str, bool] | None = None,
    ) -> None:
        """Start kube-scheduler on any KubeSchedulerConfiguration (YAML text or a mapping,
        e.g. the chart's rendered one), with `feature_gates` as its --feature-gates (None:
        `scheduler_feature_gates`). `clientConnection.kubeconfig` is set (replaced) to
        the scheduler user's kubeconfig and, when `extender_port` is given, every
        extender's urlPrefix gets that port; nothing else is changed. A Lease other than
        the default one gets its RBAC (`grant_lease`) first. Returns once /readyz answers
        and, with leader election on, once it holds its Lease (after a SIGKILL of the
        previous holder that takes its leaseDuration, 15 s by default)."""
        if self._scheduler is not None and self._scheduler.alive():
            raise ControlPlaneError("kube-scheduler already runs: stop_scheduler() first")
        assert self.binaries is not None
        doc: JSON = (
            yaml.safe_load(config) if isinstance(config, str) else copy.deepcopy(dict(config))
        )
        connection = doc.setdefault("clientConnection", {})
        connection["kubeconfig"] = str(self.kubeconfig(SCHEDULER_USER))
        if extender_port is not None:
            for extender in doc.get("extenders") or []:
                extender["urlPrefix"] = with_port(extender["urlPrefix"], extender_port)
        self._scheduler_starts += 1
        path = self.workdir / f"kube-scheduler-{self._scheduler_starts}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self._scheduler_config = path
        lease = _lease_of(doc)
        if lease is not None and lease not in _GRANTED_LEASES:
            self.grant_lease(*lease)
        before = self._holder(lease) if lease else None
        scheduler, kubeconfig = self.binaries.scheduler, str(self.kubeconfig(SCHEDULER_USER))
        gates = self.scheduler_feature_gates if feature_gates is None else feature_gates
        self._scheduler_gates = dict(gates)

        def argv() -> list[str]:
            self.scheduler_port = free_port()
            return [
                str(scheduler),
                f"--config={path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOCALHOST}",
                f"--secure-port={self.scheduler_port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                f"--v={self.scheduler_verbosity}",
                *feature_gates_flag(gates),
            ]

        with httpx.Client(verify=False) as http:
            self._scheduler = _start_until_ready(
                "kube-scheduler",
                argv,
                self._log("kube-scheduler"),
                lambda: _ok(http, f"https://{LOCALHOST}:{self.scheduler_port}/readyz"),
                timeout,
                "kube-scheduler answers /readyz",
            )
        if lease is not None:

            def leads() -> bool:
                holder = self._holder(lease)
                return bool(holder) and holder != before

            try:
                self._scheduler.wait_ready(
                    leads, timeout, f"kube-scheduler holds the Lease {lease[0]}/{lease[1]}"
                )
            except ControlPlaneError:
                self.stop_scheduler()
                raise

    def _holder(self, lease: tuple[str, str]) -> str:
        found = self.kube.lease(*lease)
        return str((found or {}).get("spec", {}).get("holderIdentity") or "")

    def stop_scheduler(self, timeout: float = 15.0) -> None:
        """Stop kube-scheduler (SIGTERM: it releases its Lease). Idempotent."""
        proc, self._scheduler = self._scheduler, None
        if proc is not None:
            proc.stop(timeout)

    def restart_scheduler(self, *, timeout: float = 60.0) -> None:
        """Stop kube-scheduler and start it again on the same config."""
        config = self._scheduler_config
        if config is None:
            raise ControlPlaneError("kube-scheduler never started")
        self.stop_scheduler()
        self.start_scheduler(
            config.read_text(), timeout=timeout, feature_gates=self._scheduler_gates
        )

    @property
    def scheduler_config(self) -> JSON | None:
        """The KubeSchedulerConfiguration kube-scheduler was last started on, as written
        for it (kubeconfig and extender port adapted); None before any start."""
        if self._scheduler_config is None:
            return None
        loaded: JSON = yaml.safe_load(self._scheduler_config.read_text())
        return loaded

    def scheduler_output(self) -> str:
        """kube-scheduler's log since it was last started."""
        if self._scheduler is None:
            raise ControlPlaneError("kube-scheduler is not running")
        return self._scheduler.output()

    @property
    def scheduler_running(self) -> bool:
        return self._scheduler is not None and self._scheduler.alive()

    def scheduler_metrics(self) -> str:
        """kube-scheduler's /metrics text (its secure port, the admin token, no TLS check:
        its certificate is self-signed)."""
        headers = {"Authorization": f"Bearer {self.tokens[ADMIN_USER]}"}
        url = f"https://{LOCALHOST}:{self.scheduler_port}/metrics"
        resp = httpx.get(url, headers=headers, verify=False, timeout=10.0)
        if resp.status_code != 200:
            raise ApiError("GET", url, resp.status_code, resp.text)
        return resp.text

    def scheduler_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
        return metric_value(self.scheduler_metrics(), name, labels)

    def wait_scheduler_nodes(self, count: int, timeout: float = 60.0) -> None:
        """Until kube-scheduler's cache holds `count` nodes (scheduler_cache_size)."""
        if self._scheduler is None:
            raise ControlPlaneError("kube-scheduler is not running")
        self._scheduler.wait_ready(
            lambda: self.scheduler_metric("scheduler_cache_size", {"type": "nodes"}) == count,
            timeout,
            f"kube-scheduler's cache holds {count} nodes",
        )

    def kubectl(self, *args: str, timeout: float = 60.0) -> str:
        """kubectl with the admin kubeconfig (for looking around while debugging)."""
        assert self.binaries is not None and self.binaries.kubectl is not None
        done = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig()}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return done.stdout


#: Leases system:kube-scheduler may already take: ours (granted at start) and the default
#: scheduler's (its bootstrap ClusterRole grants get/update on leases named kube-scheduler).
_GRANTED_LEASES = ((LEASE_NAMESPACE, LEASE_NAME), ("kube-system", "kube-scheduler"))


def _lease_of(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Lease a KubeSchedulerConfiguration elects on, or None."""
    election = config.get("leaderElection") or {}
    if election.get("leaderElect", True) is False:
        return None
    return (
        election.get("resourceNamespace") or "kube-system",
        election.get("resourceName") or "kube-scheduler",
    )


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric_samples(text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of `name` in a Prometheus text exposition."""
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            yield dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))


def metric_value(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    want = dict(labels or {}).items()
    return sum(v for got, v in metric_samples(text, name) if want <= got.items())


# --- a whole stack, for the e2e fixtures ------------------------------------------------------


def shipped_policy() -> JSON:
    """config/extender.yaml as shipped (a story sets PROMETHEUS_URL, and says what else)."""
    policy: JSON = yaml.safe_load((REPO / "config" / "extender.yaml").read_text())
    return policy


def static_policy(values: Mapping[str, float], *, threshold: float = 0.9, **overrides: Any) -> JSON:
    """A static-provider policy: metric `cpu` with exactly these node values (lower is
    better, 0..1), filtered above `threshold`; bind on; Events on placed pods on (the
    default). `overrides` replace top-level sections."""
    raw: JSON = {
        "schedulerNames": [SCHEDULER_NAME],
        "provider": "static",
        "static": {"nodes": {node: {"cpu": value} for node, value in values.items()}},
        "metrics": [{"name": "cpu", "filter": {"above": threshold}, "maxAge": 3600}],
        "bind": {"enabled": True},
        # Static values load at start-up; no later refresh replaces them.
        "prometheus": {"interval": 3600},
    }
    raw.update(overrides)
    return raw


@dataclass
class Stack:
    """One test's running chain: fake nodes, our service, kube-scheduler, a namespace."""

    control_plane: ControlPlane
    namespace: str
    service: Service
    scheduler_config: JSON
    nodes: list[FakeNode]
    #: Seconds `Kube.ensure_nodes` took to make the nodes (0 when they were there).
    nodes_seconds: float
    #: With the API server late for our service: seconds from its answering to our node
    #: cache synced (`ControlPlane.start_extender_before_api`); else None.
    api_learned_in: float | None = None

    @property
    def kube(self) -> Kube:
        return self.control_plane.kube

    def create_pod(self, name: str, **kwargs: Any) -> JSON:
        """`pod_manifest(name, **kwargs)` created in the stack's namespace."""
        return self.kube.create_pod(self.namespace, pod_manifest(name, **kwargs))

    def pod(self, name: str) -> JSON:
        return self.kube.pod(self.namespace, name)

    def wait_bound(self, name: str, timeout: float = 60.0) -> str:
        return self.kube.wait_bound(self.namespace, name, timeout)

    def deleted(self, names: Iterable[str]) -> list[str]:
        """Those of the pods `names` the API server no longer has (404), in order."""
        out = []
        for name in names:
            try:
                self.pod(name)
            except ApiError as exc:
                assert exc.status == 404, exc
                out.append(name)
        return out

    def wait_event(self, name: str, reason: str, timeout: float = 60.0) -> PodEvent:
        return self.kube.wait_event(self.namespace, name, reason, timeout)

    def events(self, name: str) -> list[PodEvent]:
        return self.kube.pod_events(self.namespace, name)

    def extender_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """Sum of our service's /metrics samples of `name` matching `labels`."""
        status, body = self.service.get("/metrics")
        assert status == 200, body
        return metric_value(body.decode(), name, labels)


class StartStack(Protocol):
    """The e2e `stack` fixture: make the nodes, start our service and kube-scheduler.

    `values` are the static policy's node values (`static_policy`), unless `policy` (a
    mapping, or a Path to a YAML policy) is given; `nodes` is a count (`fake_nodes`) or
    the nodes themselves; `weight` is the extender weight the CLI prints the config with
    (`scheduler-config --weight`; default 1); `gates` are kube-scheduler feature gates on
    top of the test's (`scheduler_gates`), `scheduler_overrides` top-level fields of its
    KubeSchedulerConfiguration."""

    def __call__(
        self,
        values: Mapping[str, float] | None = None,
        *,
        nodes: int | Sequence[FakeNode] = 5,
        policy: Mapping[str, Any] | Path | None = None,
        env: Mapping[str, str] | None = None,
        percentage_of_nodes_to_score: int | None = None,
        qps: float | None = None,
        weight: int | None = None,
        gates: Mapping[str, bool] | None = None,
        scheduler_overrides: Mapping[str, Any] | None = None,
    ) -> Stack: ...
