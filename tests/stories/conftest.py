"""A cluster lived through with every feature on at once: the harness of the stories.

Each story runs, as real processes, the extender (`decice-extender serve`) and the
rebalancer (`decice-extender rebalance`) on the shipped `config/extender.yaml` whole:
the pod and node watches, the herd guard, bind, requeue, Events, live reload of the policy
file, and the rebalancer in evict mode. What differs from the file as shipped, and why:

- `PROMETHEUS_URL`: a real Prometheus on 127.0.0.1 scraping an exporter that serves the
  series a stock kube-prometheus-stack records (`instance:node_cpu_utilisation:rate5m`,
  `node_namespace_pod:kube_pod_info:`), so the shipped query runs unchanged;
- `prometheus.interval: 2`: the stories measure seconds, not the shipped 15 s;
- its metrics become the named policy `default`, beside a `batch` policy (named policies on);
- a `rebalance` section: evict mode, checked every 2 s;
- an `overload` section: taints on (forSeconds 4 s, the cap at the default 0.3);
- `herdGuard.waitForRoom: 4`: a pod that fits on no node waits 4 s for room, not 1800 s
  (the preemption story's 7-core fillers fit nowhere by their expected use).

The Kubernetes API is the loopback fake (tests/harness/kubeapi.py), the scheduler is
played by tests/harness/scheduler.py. `Story.check()` holds every story to the same
invariants: every pod bound exactly once, no pod evicted that a rule protects, API calls
per second bounded; it reports filter and prioritize p99 during the story and at rest.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.decisions.overload import TAINT_KEY
from tests.benchmarks.bench import pct
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import wait_until
from tests.harness.promharness import FakeExporter, PrometheusServer
from tests.harness.scheduler import SchedulerPlayer
from tests.harness.service import Service

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "extender.yaml"
NS = "shop"
TOKEN = "stories-token"
INTERVAL = 2.0
"""prometheus.interval of the stories (seconds)."""
OVERLOAD_SECONDS = 4.0
"""overload.forSeconds of the stories."""
WAIT_FOR_ROOM = 4.0
"""herdGuard.waitForRoom of the stories."""
NODE_CORES = 8
QUIET_ROUNDS = 40
MAX_BACKGROUND_CALLS_PER_S = 15.0
"""API calls a second besides binds: Events (5/s), requeue patches (5/s), the rebalancer's
lists, evictions and Events, watch restarts."""


def story_policy() -> dict[str, Any]:
    """config/extender.yaml, as the module docstring says."""
    policy: dict[str, Any] = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    metrics = policy.pop("metrics")
    policy["prometheus"]["interval"] = INTERVAL
    policy["herdGuard"]["waitForRoom"] = WAIT_FOR_ROOM
    batch = [dict(copy.deepcopy(metrics[0]), weight=1, filter={"above": 0.95})]
    policy["policies"] = {
        "default": {"metrics": metrics},
        "batch": {"metrics": batch, "description": "batch jobs: hotter nodes are fine"},
    }
    policy["defaultPolicy"] = "default"
    policy["rebalance"] = {
        "mode": "evict",
        "interval": INTERVAL,
        "sustain": 1,
        "leaseNamespace": "decice-system",
    }
    policy["overload"] = {
        "enabled": True,
        "forSeconds": OVERLOAD_SECONDS,
        "leaseNamespace": "decice-system",
    }
    return policy


class Story:
    def __init__(
        self,
        api: FakeKubeAPI,
        exporter: FakeExporter,
        prometheus: PrometheusServer,
        workdir: Path,
        loads: dict[str, float],
    ) -> None:
        self.api = api
        self.exporter = exporter
        self.prometheus = prometheus
        self.workdir = workdir
        self.policy = story_policy()
        for i, (node, load) in enumerate(loads.items(), start=1):
            api.add_node(node, f"10.0.0.{i}", cpu=str(NODE_CORES))
            exporter.set(node, load, ip=f"10.0.0.{i}")
        assert api.token is not None
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", api.url, api.token)
        env = {"PROMETHEUS_URL": prometheus.url, "KUBECONFIG": str(kubeconfig)}
        self.extender = Service(self.policy, workdir, env)
        self.rebalancer = Service(
            self.policy, workdir, {**env, "POD_NAME": "rebalancer-0"}, mode="rebalance"
        )
        self.player = SchedulerPlayer(api, lambda: self.extender.url)
        self.loads = dict(loads)
        self.ever_hot = {n for n, v in loads.items() if v > 0.9}
        self.started = 0.0
        self.protected: set[str] = set()
        """Names of pods a rule protects from eviction (bare, guarded by a budget, ...)."""
        self.quiet_p99: dict[str, float] = {}
        self.api_learned_in: float | None = None
        """With the API server late: seconds from its coming back to both services
        knowing the nodes."""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, api_late: float | None = None) -> Story:
        """Both services until ready; with `api_late`, started while the API server is away,
        which comes back that many seconds after their first lists failed."""
        if api_late is not None:
            self.api.go_away()
        self.extender.start()
        self.rebalancer.start()
        if api_late is not None:
            both = (self.extender, self.rebalancer)
            wait_until(
                lambda: all("first list failed" in s.stderr() for s in both),
                30,
                "both services' first lists failed",
            )
            time.sleep(api_late)  # how late the API server is: the story's delay
            self.api.come_back()
            back = time.monotonic()
            wait_until(
                lambda: all(self.readyz(s).get("nodeCacheSynced") for s in both),
                5,
                "both services know the nodes",
            )
            self.api_learned_in = round(time.monotonic() - back, 2)
        self.wait_ready(self.extender)
        self.wait_ready(self.rebalancer)
        self.quiet_p99 = self._quiet()
        self.started = time.monotonic()
        return self

    def stop(self) -> None:
        self.player.close()
        for service in (self.extender, self.rebalancer):
            service.kill()

    def wait_ready(self, service: Service, timeout: float = 60.0) -> None:
        """/readyz 200 with every node's metric and both watches up."""

        def ready() -> bool:
            status, body = service.get("/readyz")
            if status != 200:
                return False
            doc = json.loads(body)
            watches = doc.get("watches", {})
            nodes = doc["metrics"]["cpu"]["nodes"]
            return nodes == len(self.loads) and all(w["watching"] for w in watches.values())

        try:
            wait_until(ready, timeout, f"{service.mode} is ready with every node")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{service.stderr()[-4000:]}") from None

    def _quiet(self) -> dict[str, float]:
        """filter and prioritize p99 (server ms) of the service at rest."""
        probe = SchedulerPlayer(self.api, lambda: self.extender.url)
        pod = self.pod_body("quiet-probe")
        names = list(self.loads)
        try:
            for _ in range(QUIET_ROUNDS):
                probe._verb("filter", {"Pod": pod, "Nodes": None, "NodeNames": names})
                probe._verb("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": names})
        finally:
            probe.close()
        return {verb: pct(probe.played.timings[verb], 99) for verb in ("filter", "prioritize")}

    # -- the cluster ------------------------------------------------------------------------------

    def load(self, node: str, value: float) -> None:
        """The node's CPU utilisation as Prometheus will scrape it next."""
        self.loads[node] = value
        if value > 0.9:
            self.ever_hot.add(node)
        self.exporter.set(node, value)

    def pods(
        self,
        prefix: str,
        count: int,
        cpu: str = "500m",
        *,
        priority: int = 0,
        owner: tuple[str, str] | None = ("ReplicaSet", "burst-rs"),
        created: float | None = None,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        node: str | None = None,
    ) -> list[str]:
        """Create `count` pods of ours; their names."""
        names = [f"{prefix}-{i}" for i in range(count)]
        for name in names:
            self.api.add_pod(
                NS,
                name,
                str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.workdir}/{name}")),
                cpu_request=cpu,
                node_name=node,
                phase="Running" if node else "Pending",
                owner=owner,
                created=created,
                annotations=annotations,
                labels=labels,
                priority=priority,
            )
        return names

    def pod_body(self, name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {
                "schedulerName": "decice_sched",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            },
        }

    def node_of(self, name: str) -> str:
        pod = self.api.pod(NS, name)
        assert pod is not None, name
        return str(pod["spec"].get("nodeName") or "")

    def bound(self, names: list[str]) -> bool:
        return all(self.node_of(n) for n in names)

    def readyz(self, service: Service | None = None) -> dict[str, Any]:
        _, body = (service or self.extender).get("/readyz")
        doc: dict[str, Any] = json.loads(body)
        return doc

    def metrics(self, service: Service | None = None) -> str:
        with urllib.request.urlopen((service or self.extender).url + "/metrics", timeout=5) as r:
            text: str = r.read().decode()
        return text

    # -- the invariants ---------------------------------------------------------------------------

    def check(self, placed: list[str]) -> dict[str, float]:
        """Every story's invariants; the figures it measured (printed by the caller)."""
        api = self.api
        ended = time.monotonic()
        # Every pod placed, and bound exactly once (a retried bind is recognised, never
        # sent twice to the API server as a second accepted Binding).
        assert all(self.node_of(n) for n in placed), [n for n in placed if not self.node_of(n)]
        assert {n: api.bind_count(NS, n) for n in placed} == dict.fromkeys(placed, 1)
        # No pod a rule protects was ever evicted (nor asked about).
        asked = {name for ns, name, _ in api.evictions if ns == NS}
        assert not asked & self.protected, asked & self.protected
        # Overload taints: never more than the cap, and only on nodes that were hot.
        tainted = {
            n["metadata"]["name"]
            for n in api.nodes()
            for t in n["spec"].get("taints") or ()
            if t.get("key") == TAINT_KEY
        }
        assert len(tainted) <= int(0.3 * len(self.loads)), tainted
        assert all(n in self.ever_hot for n in tainted), (tainted, self.ever_hot)
        # API calls a second besides binds, over the story.
        seconds = max(ended - self.started, 1.0)
        background = [
            r
            for r in api.requests
            if r.at >= self.started and not r.path.endswith("/binding")
            and r.query.get("watch") != ["true"]
        ]  # fmt: skip
        rate = len(background) / seconds
        assert rate <= MAX_BACKGROUND_CALLS_PER_S, f"{rate:.1f} API calls/s besides binds"
        binds = sum(1 for r in api.requests if r.path.endswith("/binding"))
        assert binds <= 2 * len(placed) + 5, f"{binds} bind calls for {len(placed)} pods"
        # filter and prioritize during the story and at rest: figures for the report, not
        # asserted (speed is never asserted by a timed test: on a shared 2-core machine one
        # scheduling hiccup makes a sub-millisecond p99 of ~30 calls 10 ms; it failed a
        # flake-loop run that way). tests/benchmarks measure latency on a quiet machine.
        figures = {"api_calls_per_s": round(rate, 2), "seconds": round(seconds, 1)}
        for verb in ("filter", "prioritize"):
            figures[f"{verb}_p99_ms"] = round(pct(self.player.played.timings[verb], 99), 3)
            figures[f"{verb}_quiet_p99_ms"] = round(self.quiet_p99[verb], 3)
        return figures


@pytest.fixture
def kube_api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(token=TOKEN) as api:
        yield api


@pytest.fixture
def story_factory(
    kube_api: FakeKubeAPI,
    exporter: FakeExporter,
    prometheus: PrometheusServer,
    tmp_path: Path,
) -> Iterator[Any]:
    stories: list[Story] = []

    def make(loads: dict[str, float], api_late: float | None = None) -> Story:
        story = Story(kube_api, exporter, prometheus, tmp_path, loads)
        stories.append(story)
        return story.start(api_late)

    yield make
    for story in stories:
        story.stop()
