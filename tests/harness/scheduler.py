"""kube-scheduler's part, played against our verbs and the loopback API server.

The stories (tests/stories/) need a scheduler that does what kube-scheduler v1.35 does
with an extender that owns filter, prioritize, preempt and bind (kubernetes
pkg/scheduler/schedule_one.go, pkg/scheduler/extender.go, framework/preemption): one pod
at a time, in queue order (priority first, then age);

- **TaintToleration** and the nodeSelector part of **NodeAffinity**: a node whose
  NoSchedule / NoExecute taints the pod does not tolerate is not considered (read with
  the extender's own `decisions.eligibility`);
- **NodeResourcesFit**: a node fits while the CPU requests of the pods on it plus this
  pod's stay within its allocatable cores; the fitting nodes go to our filter (NodeNames
  form), the ones that pass to our prioritize, and the highest score wins (`select_host`:
  ties at random, seeded);
- **bind** through our /bind (the extender owns bindVerb); an Error answer, or no answer,
  leaves the pod in the queue for the next cycle;
- **preemption** when no node fits: on each node, the lower-priority pods, fewest first
  after reprieving the highest-priority ones that still fit (upstream's
  selectVictimsOnNode), are sent to our /preempt as NodeNameToMetaVictims; among the nodes
  we keep, the one whose victims have the lowest priority wins (pickOneNodeForPreemption);
  its victims are deleted and the pod is tried again. None kept: "no candidate node for
  preemption", the pod waits;
- a pod our filter turns away from every node waits in the **unschedulable pool** until it
  is updated (our requeue annotation patch counts; a status change does not) or
  `unschedulable_seconds` pass (5 minutes upstream).

Every verb's `Server-Timing` is recorded. The player runs in the test's thread, a cycle at
a time (`cycle`, `run_until`): deterministic for a seed.
"""

from __future__ import annotations

import http.client
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import orjson

from extender.decisions.nodes import node_info, read_eligibility
from extender.simulation.upstream import select_host as upstream_select_host
from tests.harness.kubeapi import FakeKubeAPI

JSON = dict[str, Any]
SCHEDULER = "decice_sched"
UNSCHEDULABLE_SECONDS = 300.0
HEADERS = {"Content-Type": "application/json"}


def select_host(candidates: Sequence[str], scores: Mapping[str, int], rng: random.Random) -> str:
    """kube-scheduler's selectHost (the simulation's model of it); nodes missing from the
    extender's answer (maxHosts) score 0."""
    return upstream_select_host([(node, scores.get(node, 0)) for node in candidates], rng)


def cores(quantity: str | None) -> float:
    """A CPU quantity ("500m", "2") in cores."""
    if not quantity:
        return 0.0
    if quantity.endswith("m"):
        return float(Decimal(quantity[:-1]) / 1000)
    return float(Decimal(quantity))


def cpu_request(pod: JSON) -> float:
    containers = pod["spec"].get("containers") or ()
    return sum(cores((c.get("resources") or {}).get("requests", {}).get("cpu")) for c in containers)


def binding(pod: JSON, node: str) -> JSON:
    meta = pod["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node,
    }


@dataclass
class Parked:
    """A pod in the unschedulable pool: when, and its version then (an update moves it)."""

    since: float
    version: str
    reason: str


@dataclass
class Played:
    """What the player did: every verb's server time (ms), binds, preemptions, errors."""

    timings: dict[str, list[float]] = field(
        default_factory=lambda: {"filter": [], "prioritize": [], "preempt": [], "bind": []}
    )
    bound: dict[str, str] = field(default_factory=dict)
    """uid -> node, for every pod the player bound (through our /bind)."""
    bound_at: dict[str, float] = field(default_factory=dict)
    preempted: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(preemptor uid, node, victim uids) per preemption."""
    no_candidate: list[str] = field(default_factory=list)
    """Preemptors for which we kept no candidate node."""
    errors: list[str] = field(default_factory=list)
    """Verb calls that failed (no answer, 5xx, or an Error answer)."""


class SchedulerPlayer:
    def __init__(
        self,
        api: FakeKubeAPI,
        extender: Callable[[], str],
        *,
        scheduler: str = SCHEDULER,
        seed: int = 42,
        unschedulable_seconds: float = UNSCHEDULABLE_SECONDS,
        start_pods: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`extender`: the extender's base URL, asked at every call (a restarted process
        may come back on another port); `start_pods`: a bound pod turns Running, as its
        kubelet would start it."""
        self.api = api
        self._extender = extender
        self.scheduler = scheduler
        self.rng = random.Random(seed)
        self.unschedulable_seconds = unschedulable_seconds
        self.start_pods = start_pods
        self.clock = clock
        self.parked: dict[str, Parked] = {}
        self.played = Played()
        self._conn: http.client.HTTPConnection | None = None
        self._conn_url = ""

    # -- the queue ----------------------------------------------------------------------------

    def pending(self) -> list[JSON]:
        """Our pods without a node, not being deleted: priority first, then age."""
        pods = [
            p
            for p in self.api.pods()
            if p["spec"].get("schedulerName") == self.scheduler
            and not p["spec"].get("nodeName")
            and "deletionTimestamp" not in p["metadata"]
        ]
        order = {id(p): i for i, p in enumerate(pods)}
        return sorted(pods, key=lambda p: (-int(p["spec"].get("priority") or 0), order[id(p)]))

    def cycle(self, stop: Callable[[], bool] = lambda: False) -> int:
        """Try every pending pod once (those in the unschedulable pool only if they were
        updated or waited long enough), until `stop()`; the number bound."""
        bound = 0
        for pod in self.pending():
            if stop():
                break
            uid = pod["metadata"]["uid"]
            parked = self.parked.get(uid)
            if parked is not None:
                moved = pod["metadata"].get("resourceVersion") != parked.version
                if not moved and self.clock() - parked.since < self.unschedulable_seconds:
                    continue
                del self.parked[uid]
            bound += self.attempt(pod) == "bound"
        return bound

    def run_until(
        self, done: Callable[[], bool], timeout: float, what: str, *, each: float = 0.05
    ) -> None:
        """Cycle until `done()`; between cycles that bound nothing, wait `each` seconds so
        the service's watches and refreshes move on. AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout} s waiting until {what}; "
                    f"{len(self.pending())} pending, last errors {self.played.errors[-3:]}"
                )
            if not self.cycle(done):
                time.sleep(each)

    # -- one scheduling attempt ---------------------------------------------------------------

    def attempt(self, pod: JSON) -> str:
        """ "bound", "unschedulable", "preempting" or "error"."""
        request = cpu_request(pod)
        allowed = self.tolerated(pod)
        fits = [n for n, free in self.free().items() if free + 1e-9 >= request and n in allowed]
        passed: list[str] = []
        unresolvable: set[str] = set()
        if fits:
            answer = self._verb("filter", {"Pod": pod, "Nodes": None, "NodeNames": fits})
            if answer is None:
                return "error"
            passed = answer.get("NodeNames") or []
            unresolvable = set(answer.get("FailedAndUnresolvableNodes") or {})
        if not passed:
            # PostFilter: preemption, on the nodes where it might help (not the ones an
            # extender rejected as unresolvable).
            return self._preempt(pod, request, unresolvable)
        scores = self._verb("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": passed})
        if scores is None:
            scores = []  # a prioritize error is ignored upstream
        node = select_host(passed, {h["Host"]: h["Score"] for h in scores}, self.rng)
        result = self._verb("bind", binding(pod, node))
        if result is None:
            return "error"
        if result.get("Error"):
            self.played.errors.append(f"bind {pod['metadata']['name']}: {result['Error']}")
            return "error"
        uid = pod["metadata"]["uid"]
        self.played.bound[uid] = node
        self.played.bound_at[uid] = self.clock()
        if self.start_pods:
            meta = pod["metadata"]
            self.api.set_phase(meta["namespace"], meta["name"], "Running")
        return "bound"

    def tolerated(self, pod: JSON) -> set[str]:
        """The nodes whose NoSchedule / NoExecute taints the pod tolerates, and whose labels
        its nodeSelector matches (TaintToleration, NodeAffinity)."""
        eligibility = read_eligibility(pod)
        return {n["metadata"]["name"] for n in self.api.nodes() if eligibility.allows(node_info(n))}

    def free(self) -> dict[str, float]:
        """node -> allocatable cores not requested by the pods on it."""
        free = {
            n["metadata"]["name"]: cores(n["status"]["allocatable"].get("cpu"))
            for n in self.api.nodes()
        }
        for p in self.api.pods():
            node = p["spec"].get("nodeName")
            if node in free and p["status"].get("phase") not in ("Succeeded", "Failed"):
                free[node] -= cpu_request(p)
        return free

    def _preempt(self, pod: JSON, request: float, unresolvable: set[str]) -> str:
        priority = int(pod["spec"].get("priority") or 0)
        allowed = self.tolerated(pod)
        free = {n: f for n, f in self.free().items() if n not in unresolvable and n in allowed}
        on_node: dict[str, list[JSON]] = {}
        for p in self.api.pods():
            node = p["spec"].get("nodeName")
            if node and "deletionTimestamp" not in p["metadata"]:
                on_node.setdefault(node, []).append(p)
        candidates: dict[str, list[JSON]] = {}
        for node in sorted(free):
            lower = [
                p for p in on_node.get(node, ()) if int(p["spec"].get("priority") or 0) < priority
            ]
            room = free[node] + sum(cpu_request(p) for p in lower)
            if room + 1e-9 < request:
                continue
            # Reprieve the highest-priority victims that still leave room (upstream).
            victims = []
            for p in sorted(lower, key=lambda p: -int(p["spec"].get("priority") or 0)):
                if room - cpu_request(p) + 1e-9 >= request:
                    room -= cpu_request(p)  # kept: it still fits without it
                else:
                    victims.append(p)
            candidates[node] = victims
        if not candidates:
            self._park(pod, "no feasible node, and preemption would help on none")
            return "unschedulable"
        meta = {
            node: {"Pods": [{"UID": v["metadata"]["uid"]} for v in victims], "NumPDBViolations": 0}
            for node, victims in candidates.items()
        }
        answer = self._verb("preempt", {"Pod": pod, "NodeNameToMetaVictims": meta})
        if answer is None:
            return "error"
        kept = answer.get("NodeNameToMetaVictims") or {}
        if not kept:
            self.played.no_candidate.append(pod["metadata"]["uid"])
            self._park(pod, "preemption: no candidate node for preemption")
            return "unschedulable"

        def rank(node: str) -> tuple[int, int, int, str]:
            prios = [int(v["spec"].get("priority") or 0) for v in candidates[node]]
            return (max(prios, default=0), sum(prios), len(prios), node)

        node = min(kept, key=rank)
        for victim in candidates[node]:
            vmeta = victim["metadata"]
            self.api.delete_pod(vmeta["namespace"], vmeta["name"])
        self.played.preempted.append(
            (pod["metadata"]["uid"], node, [v["metadata"]["uid"] for v in candidates[node]])
        )
        return "preempting"

    def _park(self, pod: JSON, reason: str) -> None:
        version = str(pod["metadata"].get("resourceVersion") or "")
        self.parked[pod["metadata"]["uid"]] = Parked(self.clock(), version, reason)

    # -- the verbs over HTTP ------------------------------------------------------------------

    def _verb(self, verb: str, body: JSON) -> Any:
        """The decoded answer, or None (recorded in `errors`) when there was none."""
        try:
            status, data, timing = self._post(f"/{verb}", orjson.dumps(body))
        except (OSError, http.client.HTTPException) as exc:
            self._close()
            self.played.errors.append(f"{verb}: {type(exc).__name__}: {exc}")
            return None
        if timing is not None:
            self.played.timings[verb].append(timing)
        if status != 200:
            self.played.errors.append(f"{verb}: HTTP {status}: {data[:200]!r}")
            return None
        return orjson.loads(data)

    def _post(self, path: str, body: bytes) -> tuple[int, bytes, float | None]:
        url = self._extender()
        if self._conn is None or url != self._conn_url:
            self._close()
            parts = urlsplit(url)
            host = parts.hostname or "127.0.0.1"
            self._conn = http.client.HTTPConnection(host, parts.port, timeout=10)
            self._conn_url = url
        self._conn.request("POST", path, body, HEADERS)
        response = self._conn.getresponse()
        data = response.read()
        return response.status, data, server_ms(response.getheader("Server-Timing"))

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._close()


def server_ms(header: str | None) -> float | None:
    """`app;dur=0.123` -> 0.123."""
    if not header or "dur=" not in header:
        return None
    return float(header.split("dur=", 1)[1].split(",", 1)[0].split(";", 1)[0])
