"""The Kubernetes-side process (DECICE_KUBE_PROCESS=1: binds and Events through a child
process, extender.cluster.kubeside) SIGKILLed in the middle of a burst, on the real
control plane: the verbs' process never stops answering, its supervisor starts the child
again, and every pod of the burst ends bound, none twice.

While the child is down, our /bind refuses with the reason (nothing reserved) and a bind
in flight at the kill answers "outcome unknown" (the reservation kept); the scheduler
reports either as a FailedScheduling Event and retries the pod after its back-off. A bind
whose Binding reached the API server before the kill reads, on the retry, as already
bound (409 to the same node), or the scheduler finds the pod assigned and leaves it (its
FailedScheduling names the unknown outcome, and no Scheduled Event follows): one Binding
per pod, one Scheduled Event per pod at most.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from pathlib import Path

import pytest

from tests.harness.controlplane import ControlPlane, PodEvent, StartStack, pod_manifest

pytestmark = pytest.mark.e2e

VALUES = {"node-1": 0.30, "node-2": 0.40, "node-3": 0.20, "node-4": 0.35, "node-5": 0.25}
BURST = 100
KILL_AFTER = 10


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def worker_of(pid: int) -> int | None:
    """The Kubernetes-side child of our service (its command line names the module)."""
    for child in children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"extender.cli.kubeworker" in argv:
            return child
    return None


def test_the_kube_side_killed_mid_burst_comes_back_and_every_pod_is_bound_once(
    stack: StartStack, control_plane: ControlPlane
) -> None:
    s = stack(VALUES, nodes=5, env={"DECICE_KUBE_PROCESS": "1"})
    service_pid = s.service.pid
    first = worker_of(service_pid)
    assert first is not None, "binds do not go through a Kubernetes-side process"
    names = [f"web-{i:03d}" for i in range(BURST)]
    bound_by_us = {"verb": "bind", "outcome": "bound"}

    with concurrent.futures.ThreadPoolExecutor(1) as creating:
        manifests = [pod_manifest(n) for n in names]
        created = creating.submit(s.kube.create_pods, s.namespace, manifests)
        s.kube.wait_until(
            lambda: s.extender_metric("decice_decisions_total", bound_by_us) >= KILL_AFTER,
            60,
            f"{KILL_AFTER} pods are bound",
        )
        os.kill(first, signal.SIGKILL)
        killed_at = time.monotonic()
        assert len(created.result(60)) == BURST

    s.kube.wait_until(
        lambda: (w := worker_of(service_pid)) is not None and w != first,
        60,
        "the supervisor started the Kubernetes side again",
    )
    placed = s.kube.wait_all_bound(s.namespace, names, 120)
    print(f"\nevery pod bound {time.monotonic() - killed_at:.1f} s after the kill")
    assert s.service.alive(), "the verbs' process went down with its child"
    assert set(placed.values()) <= set(VALUES)

    events: dict[str, list[PodEvent]] = {}

    def scheduled(name: str) -> list[PodEvent]:
        return [e for e in events.get(name, ()) if e.reason == "Scheduled"]

    def cut(name: str) -> bool:
        # Our bind was in flight at the kill and reached the API server: the scheduler
        # got our "outcome unknown" Error, then found the pod assigned (no Scheduled).
        return any(
            e.reason == "FailedScheduling" and "is unknown" in e.message
            for e in events.get(name, ())
        )

    def settled() -> bool:
        events.clear()
        events.update(s.kube.events_by_pod(s.namespace))
        return all(scheduled(n) or cut(n) for n in names)

    s.kube.wait_until(settled, 60, "every pod's Scheduled Event (or its cut bind's)")
    twice = {n: len(scheduled(n)) for n in names if sum(e.count for e in scheduled(n)) > 1}
    assert not twice, f"pods with more than one Scheduled Event: {twice}"
    elsewhere = {
        n: e.message
        for n in names
        for e in scheduled(n)
        if not e.message.endswith(f"/{n} to {placed[n]}")
    }
    assert not elsewhere, elsewhere
    refused = s.extender_metric("decice_decisions_total", {"verb": "bind", "outcome": "refused"})
    failed = s.extender_metric("decice_decisions_total", {"verb": "bind", "outcome": "error"})
    print(f"binds refused while it was down: {refused:.0f}; cut by the kill: {failed:.0f}")
