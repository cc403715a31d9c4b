"""What a real cluster's kubelet and ReplicaSet controller do for one Deployment's pods,
played on the control plane of tests/harness/controlplane.py, where neither runs.

* the kubelet: a pod the API shows bound starts (`on_start(name, uid, node)`: the test's
  exporter starts its use) and is reported Running with its Ready conditions, so the
  rebalancer, which lists `status.phase=Running` pods, sees it; a pod being deleted (an
  eviction with a grace period leaves it Terminating) stops (`on_stop`) and its deletion
  is confirmed (grace 0), as a kubelet confirms it once its containers exit;
* the ReplicaSet controller: every pod of the Deployment that is gone or going (evicted,
  deleted) gets a successor, a new pod of the same ReplicaSet (the next name, a new UID),
  for the scheduler to place.

`step()` does one pass on one pod list, for a test to call on its own clock (a bench's
once-a-second loop, or a story's bounded wait): nothing runs in the background.

    player = ReplicaSetPlayer(kube, namespace, web, on_start=start, on_stop=stop)
    player.created(kube.create_pod(namespace, web.pod(7, scheduler_name=SCHEDULER_NAME)))
    moved = player.step().successors
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tests.harness.controlplane import JSON, SCHEDULER_NAME, Kube
from tests.harness.workloads import Deployment


@dataclass(frozen=True, slots=True)
class Departure:
    """A pod of the Deployment that left its node, and the pod created in its place."""

    name: str
    node: str | None
    """Where it ran (None: never bound)."""
    successor: str


@dataclass
class Step:
    """What one pass did."""

    started: list[tuple[str, str]] = field(default_factory=list)
    """(pod, node) of the pods started (reported Running) in this pass."""
    departures: list[Departure] = field(default_factory=list)


@dataclass(slots=True)
class _Known:
    uid: str
    node: str | None = None
    """Set once started (bound and reported Running)."""


class ReplicaSetPlayer:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        deployment: Deployment,
        *,
        next_index: int,
        on_start: Callable[[str, str, str], None] = lambda name, uid, node: None,
        on_stop: Callable[[str, str], None] = lambda name, node: None,
        scheduler_name: str = SCHEDULER_NAME,
    ) -> None:
        """`next_index`: the number of the first successor (Deployment.pod_name)."""
        self._kube = kube
        self._namespace = namespace
        self._deployment = deployment
        self._next = next_index
        self._on_start = on_start
        self._on_stop = on_stop
        self._scheduler_name = scheduler_name
        self._known: dict[str, _Known] = {}
        self.departures: list[Departure] = []
        """Every departure so far, in order."""

    def created(self, pod: JSON) -> None:
        """A pod of the Deployment the test created (its API object)."""
        meta = pod["metadata"]
        self._known[meta["name"]] = _Known(meta["uid"])

    def running(self, pods: Iterable[JSON]) -> None:
        """Pods of the Deployment already started and reported Running by the test (placed
        before the story began): started here, `on_start` is not called for them."""
        for pod in pods:
            meta = pod["metadata"]
            self._known[meta["name"]] = _Known(meta["uid"], pod["spec"]["nodeName"])

    @property
    def started(self) -> dict[str, str]:
        """pod -> node of every started pod still there."""
        return {name: k.node for name, k in self._known.items() if k.node is not None}

    def step(self) -> Step:
        """One pass: start the pods bound since the last, stop and replace the ones gone."""
        out = Step()
        selector = ",".join(f"{k}={v}" for k, v in self._deployment.labels.items())
        listed = {p["metadata"]["name"]: p for p in self._kube.pods(self._namespace, selector)}
        for name, known in list(self._known.items()):
            pod = listed.get(name)
            if pod is None or pod["metadata"]["uid"] != known.uid:
                out.departures.append(self._replace(name, known, confirm=False))
            elif pod["metadata"].get("deletionTimestamp"):
                out.departures.append(self._replace(name, known, confirm=True))
            elif known.node is None and pod["spec"].get("nodeName"):
                known.node = pod["spec"]["nodeName"]
                self._kube.mark_running(self._namespace, [name])
                self._on_start(name, known.uid, known.node)
                out.started.append((name, known.node))
        self.departures += out.departures
        return out

    def _replace(self, name: str, known: _Known, *, confirm: bool) -> Departure:
        del self._known[name]
        if known.node is not None:
            self._on_stop(name, known.node)
        if confirm:  # Terminating: its containers are gone, the kubelet confirms it
            self._kube.delete_pods(self._namespace, [name])
        index, self._next = self._next, self._next + 1
        manifest = self._deployment.pod(index, scheduler_name=self._scheduler_name)
        successor = self._kube.create_pod(self._namespace, manifest)
        self.created(successor)
        return Departure(name, known.node, successor["metadata"]["name"])
