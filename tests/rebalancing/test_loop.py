"""extender.rebalancing.loop against the loopback API server: Krake's example in dry-run and
evict mode, PodDisruptionBudget refusals, API errors, a recreated pod and a lost lease.

The engine holds a static snapshot the test swaps, as a refresh would; the pods live in
the fake API server (tests/harness/kubeapi.py), listed and evicted through the real KubeClient.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from extender.cluster.client import KubeClient
from extender.cluster.client.errors import KubeError
from extender.decisions.engine import Engine
from extender.decisions.model import PodEvent
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.rebalancing.loop import Rebalancer, eviction_outcome, refusal_reason
from extender.service.compose import build_rebalancer
from extender.service.telemetry import RebalanceTelemetry
from tests.harness.fixtures import NOW, make_snapshot
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.kubecalls import KubeCalls
from tests.rebalancing.test_plan import KRAKE, krake_values

OLD = NOW - 3600


class Lease:
    """Leadership as the rebalancer reads it; `lose_after` evictions flips it off."""

    def __init__(self, leading: bool = True, lose_after: int | None = None) -> None:
        self.leading = leading
        self.lose_after = lose_after
        self.api: FakeKubeAPI | None = None

    @property
    def is_leader(self) -> bool:
        if self.lose_after is not None and self.api is not None:
            return self.leading and len(self.api.evictions) < self.lose_after
        return self.leading

    async def run(self) -> None:
        """Nothing to campaign for: leading is set by the test."""

    def detail(self) -> dict[str, object]:
        return {"identity": "test", "leading": self.is_leader}


class Counts:
    def __init__(self) -> None:
        self.decisions: dict[tuple[str, str], int] = {}
        self.cycles: dict[str, int] = {}
        self.refusals: dict[str, int] = {}

    def rebalanced(self, mode: str, outcome: str, count: int = 1) -> None:
        self.decisions[(mode, outcome)] = self.decisions.get((mode, outcome), 0) + count

    def rebalance_cycle(self, result: str) -> None:
        self.cycles[result] = self.cycles.get(result, 0) + 1

    def refused(self, reason: str) -> None:
        self.refusals[reason] = self.refusals.get(reason, 0) + 1


def settings(mode: str = "evict", **rebalance: Any) -> Settings:
    raw: dict[str, Any] = {
        **KRAKE,
        "bind": {"enabled": False},
        "rebalance": {"mode": mode, "sustain": 1, "margin": 3, **rebalance},
    }
    return parse_settings(raw)


@pytest.fixture
async def api() -> AsyncIterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        yield server


class Hooked(KubeCalls):
    """The real client, with `after_list` run once the pods (running, then waiting) were
    listed: a test's way to change the cluster between the check's lists and its evictions."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.after_list: Callable[[], None] = lambda: None

    async def list_pods(
        self,
        field_selector: str = "",
        *,
        limit: int = 500,
        max_pages: int = 100,
    ) -> AsyncIterator[dict[str, Any]]:
        pods = self.kube.list_pods(field_selector, limit=limit, max_pages=max_pages)
        async for doc in pods:
            yield doc
        if "status.phase=Pending" in field_selector:  # the last of the check's lists
            self.after_list()

    async def list_pdbs(self, *, limit: int = 500, max_pages: int = 100) -> list[dict[str, Any]]:
        return await self.kube.list_pdbs(limit=limit, max_pages=max_pages)

    async def evict(self, namespace: str, name: str, uid: str, *, dry_run: bool = False) -> None:
        await self.kube.evict(namespace, name, uid, dry_run=dry_run)

    async def create_event(self, event: PodEvent) -> None:
        await self.kube.create_event(event)


class Stack:
    def __init__(self, api: FakeKubeAPI, s: Settings, lease: Lease | None = None) -> None:
        self.api = api
        self.engine = Engine(s, make_snapshot(krake_values(0.9, 0.1)), NOW)
        self.kube = KubeClient(client_for(api), timeout=2.0, retries=1, backoff=0.01)
        self.hooked = Hooked(self.kube)
        self.lease = lease or Lease()
        self.lease.api = api
        self.counts = Counts()
        self.rebalancer = Rebalancer(
            self.engine,
            self.hooked,
            self.lease,
            self.counts,
            lambda: {},
            clock=lambda: NOW,
            rng=random.Random(11),
        )

    def values(self, cost: float, green: float) -> None:
        """A refresh: new values, new tables."""
        self.engine.install(make_snapshot(krake_values(cost, green)), None, NOW)


@pytest.fixture
async def stack(api: FakeKubeAPI) -> AsyncIterator[Stack]:
    made = Stack(api, settings())
    yield made
    await made.kube.close()


def app_pod(api: FakeKubeAPI, name: str = "app", node: str = "a", **kw: Any) -> str:
    uid = f"uid-{name}"
    kw.setdefault("owner", ("ReplicaSet", "app-7d4"))
    kw.setdefault("phase", "Running")
    api.add_pod("shop", name, uid, node_name=node, created=OLD, **kw)
    return uid


async def test_krake_in_evict_mode_moves_once_then_leaves_it_alone(stack: Stack) -> None:
    api = stack.api
    app_pod(api)
    first = await stack.rebalancer.check()
    assert first is not None and not first.moves and api.evictions == []

    stack.values(0.1, 0.9)  # the values swap: b is now the 9.1 place
    second = await stack.rebalancer.check()
    assert second is not None and [d.target for d in second.moves] == ["b"]
    assert api.evictions == [("shop", "app", "uid-app")]
    pod = api.pod("shop", "app")
    assert pod is not None and pod["metadata"].get("deletionTimestamp")  # terminating
    [event] = [e for e in api.events if e["reason"] == "Evicted"]
    assert event["regarding"]["name"] == "app" and event["action"] == "Rebalance"
    assert event["note"].startswith("evicted: shop/app on a (score 1), best b (score 5)")

    # Its ReplicaSet's successor lands on b; the terminating pod is never evicted again.
    app_pod(api, "app-2", node="b")
    for _ in range(5):
        again = await stack.rebalancer.check()
        assert again is not None and not again.moves
    assert len(api.evictions) == 1
    assert stack.counts.decisions[("evict", "evicted")] == 1


async def test_dry_run_logs_and_posts_what_it_would_move_and_evicts_nothing(
    api: FakeKubeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    stack = Stack(api, settings("dry-run"))
    try:
        app_pod(api)
        stack.values(0.1, 0.9)
        with caplog.at_level(logging.INFO, logger="decice.rebalancer"):
            result = await stack.rebalancer.check()
        assert result is not None and len(result.moves) == 1
        # The server was asked (dryRun: ["All"]) and nothing changed.
        assert api.dry_run_evictions == [("shop", "app", "uid-app")]
        assert api.eviction_count("shop", "app", dry_run=False) == 0
        pod = api.pod("shop", "app")
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")
        line = "rebalance (dry-run): would move shop/app on a (score 1), best b (score 5)"
        assert any(r.getMessage().startswith(line) for r in caplog.records)
        [event] = api.events
        assert event["reason"] == "WouldMove" and event["note"].startswith("would move: ")
        assert stack.counts.decisions[("dry-run", "would_move")] == 1
    finally:
        await stack.kube.close()


async def test_a_pod_its_budget_guards_is_held_without_asking_and_never_forced(
    stack: Stack,
) -> None:
    api = stack.api
    app_pod(api)
    api.block_evictions("shop", "app", "pdb-app")  # a budget that allows no disruption
    stack.values(0.1, 0.9)
    for _ in range(2):
        result = await stack.rebalancer.check()
        assert result is not None and not result.moves
        [held] = [d for d in result.decisions if d.outcome == "held"]
        assert held.reason.endswith("PodDisruptionBudget pdb-app allows no disruption now")
    assert api.eviction_count("shop", "app") == 0  # known from the list: never asked
    api.allow_evictions("shop", "app")
    await stack.rebalancer.check()
    assert stack.counts.decisions[("evict", "evicted")] == 1


async def test_a_refusal_backs_off_doubling_and_leaves_the_slot_to_the_next_pod(
    api: FakeKubeAPI,
) -> None:
    # The budgets cannot be listed (no RBAC for them), so the API's 429 is the first word.
    clock = [NOW]
    stack = Stack(api, settings(maxEvictionsPerNode=1, maxEvictionsPerCycle=5))
    stack.rebalancer = Rebalancer(
        stack.engine,
        stack.hooked,
        stack.lease,
        stack.counts,
        lambda: {},
        clock=lambda: clock[0],
        rng=random.Random(4),
    )
    try:
        app_pod(api, "app-1", labels={"app": "guarded"})
        app_pod(api, "app-2")
        api.add_pdb("shop", "guarded", match_labels={"app": "guarded"}, disruptions_allowed=0)
        stack.values(0.1, 0.9)
        # Every check, the budget list right after the pod list is forbidden (never retried).
        stack.hooked.after_list = lambda: api.fail_next(403)
        result = await stack.rebalancer.check()
        assert result is not None
        # app-1 is first in line and refused; the node's one slot goes to app-2.
        assert [d.pod.facts.name for d in result.moves] == ["app-2"]
        [refused] = [d for d in result.decisions if d.outcome == "refused"]
        assert refused.pod.facts.name == "app-1"
        assert stack.counts.refusals == {"budget": 1}
        assert api.eviction_count("shop", "app-1") == 1
        interval = stack.engine.settings.rebalance.interval
        # Next check: app-1 waits out its back-off (one interval) without asking.
        for wait, asked in ((interval - 1, 1), (interval, 2)):
            fresh(stack, clock, NOW + wait)
            await stack.rebalancer.check()
            assert api.eviction_count("shop", "app-1") == asked, wait
        # Refused again: the wait is drawn between one interval and two (the ceiling doubled).
        uid = api.pod("shop", "app-1")["metadata"]["uid"]  # type: ignore[index]
        again = stack.rebalancer.backoff.next_try(uid)
        assert again is not None and NOW + 2 * interval <= again <= NOW + 3 * interval
        fresh(stack, clock, again - 1)
        await stack.rebalancer.check()
        assert api.eviction_count("shop", "app-1") == 2
        fresh(stack, clock, again)
        await stack.rebalancer.check()
        assert api.eviction_count("shop", "app-1") == 3
        assert stack.counts.refusals == {"budget": 3}
    finally:
        await stack.kube.close()


def fresh(stack: Stack, clock: list[float], now: float) -> None:
    """Time passes, and a refresh keeps the same values current."""
    clock[0] = now
    stack.engine.install(make_snapshot(krake_values(0.1, 0.9), fetched_at=now), None, now)


async def test_protected_pods_in_the_cluster_are_never_evicted(stack: Stack) -> None:
    api = stack.api
    api.add_pod("shop", "bare", "u1", node_name="a", phase="Running", created=OLD)
    app_pod(api, "ds", owner=("DaemonSet", "agent"))
    app_pod(api, "static", owner=("Node", "a"))
    app_pod(api, "pinned", annotations={"decice.io/rebalance": "false"})
    api.add_pod(
        "shop",
        "young",
        "u5",
        node_name="a",
        phase="Running",
        created=NOW - 10,
        owner=("ReplicaSet", "r"),
    )
    app_pod(api, "pending", phase="Pending")  # not listed: status.phase=Running only
    app_pod(api, "other", scheduler_name="default-scheduler")  # not ours: not listed
    stack.values(0.1, 0.9)
    result = await stack.rebalancer.check()
    assert result is not None and not result.moves and api.evictions == []
    assert sum(result.skipped.values()) == 5


async def test_a_failed_pod_list_backs_off_and_a_failed_eviction_stops_the_check(
    stack: Stack,
) -> None:
    api = stack.api
    for i in range(3):
        app_pod(api, f"app-{i}")
    stack.values(0.1, 0.9)
    api.fail_next(500, times=4)  # the list and its retry, twice
    interval = stack.engine.settings.rebalance.interval
    assert await stack.rebalancer.check() is None
    assert interval <= stack.rebalancer.delay() <= 2 * interval  # drawn: full jitter
    assert await stack.rebalancer.check() is None
    assert interval <= stack.rebalancer.delay() <= 4 * interval
    assert stack.counts.cycles["failed"] == 2

    settings_wide = settings(maxEvictionsPerCycle=3, maxEvictionsPerNode=3)
    stack.engine.install(stack.engine.snapshot, None, NOW, settings_wide)
    # The budget list, then the first eviction: forbidden, never retried.
    stack.hooked.after_list = lambda: api.fail_next(403, times=2)
    result = await stack.rebalancer.check()
    assert result is not None and stack.rebalancer.delay() == interval
    assert not result.moves and len(api.evictions) == 1  # stopped after the failure
    assert [d.reason for d in result.decisions if d.outcome == "held"] == ["check stopped"] * 3
    assert stack.counts.decisions[("evict", "failed")] == 1


async def test_a_recreated_pod_is_gone_not_retried(stack: Stack) -> None:
    api = stack.api
    app_pod(api)
    stack.values(0.1, 0.9)

    # Between the list and the eviction the pod is deleted and re-created under its name.
    def recreate() -> None:
        api.delete_pod("shop", "app")
        api.add_pod(  # same name, a new object: a new UID
            "shop",
            "app",
            "uid-app-new",
            node_name="a",
            phase="Running",
            created=OLD,
            owner=("ReplicaSet", "app-7d4"),
        )

    stack.hooked.after_list = recreate
    await stack.rebalancer.check()
    assert stack.counts.decisions[("evict", "gone")] == 1
    pod = api.pod("shop", "app")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_the_leader_gauge_follows_the_lease() -> None:
    registry = CollectorRegistry()
    lease = Lease(leading=False)
    counters = RebalanceTelemetry(registry, lambda: lease.is_leader)
    assert registry.get_sample_value("decice_rebalance_leader") == 0
    lease.leading = True
    counters.rebalanced("evict", "evicted")
    assert registry.get_sample_value("decice_rebalance_leader") == 1
    labels = {"mode": "evict", "outcome": "evicted"}
    assert registry.get_sample_value("decice_rebalance_decisions_total", labels) == 1
    counters.refused("budget")
    counters.refused("budget")
    counters.refused("throttled")
    refusals = "decice_rebalance_refusals_total"
    assert registry.get_sample_value(refusals, {"reason": "budget"}) == 2
    assert registry.get_sample_value(refusals, {"reason": "throttled"}) == 1


async def test_losing_the_lease_stops_evictions_at_once(api: FakeKubeAPI) -> None:
    lease = Lease(lose_after=1)
    stack = Stack(api, settings(maxEvictionsPerCycle=3, maxEvictionsPerNode=3), lease)
    try:
        for i in range(3):
            app_pod(api, f"app-{i}")
        stack.values(0.1, 0.9)
        result = await stack.rebalancer.check()
        assert result is not None and len(result.moves) == 1
        assert len(api.evictions) == 1  # the lease went after the first
        lease.leading = False
        assert await stack.rebalancer.check() is None
        assert stack.counts.cycles["skipped"] == 1 and len(api.evictions) == 1
    finally:
        await stack.kube.close()


class Elector(Lease):
    """A stand-in for extender.cluster.leader.elector.LeaderElector in the service wiring."""

    async def run(self) -> None:
        await asyncio.Event().wait()  # campaigns until cancelled


async def test_rebalance_mode_serves_health_and_no_verbs(api: FakeKubeAPI) -> None:
    kube = KubeClient(client_for(api), timeout=2.0, retries=1, backoff=0.01)
    service = build_rebalancer(settings("dry-run"), kube=kube, leader=Elector())
    assert service.rebalancer is not None
    # The extender posts placement Events and requeues; the rebalancer never does.
    assert not service.engine.settings.explain.events
    assert not service.engine.settings.requeue.enabled
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.post("/filter", content=b"{}")).status_code == 404
        ready = (await client.get("/readyz")).json()
        assert ready["rebalancer"]["mode"] == "dry-run"
        assert ready["rebalancer"]["leader"] == {"identity": "test", "leading": True}
        metrics = (await client.get("/metrics")).text
        assert "decice_rebalance_leader 1.0" in metrics
    await kube.close()
    with pytest.raises(ValueError, match="needs a Kubernetes client"):
        build_rebalancer(settings(), kube=None, leader=Elector())


@pytest.mark.parametrize("mode", ["dry-run", "evict"])
async def test_one_guarded_pod_never_stalls_its_node(api: FakeKubeAPI, mode: str) -> None:
    # The story: a hot node with a ReplicaSet pod whose budget allows no disruption,
    # a bare pod and a movable pod; one eviction per node per check.
    stack = Stack(api, settings(mode, maxEvictionsPerNode=1))
    try:
        app_pod(api, "guarded-hot", labels={"app": "guarded"})
        api.add_pod("shop", "bare", "uid-bare", node_name="a", phase="Running", created=OLD)
        app_pod(api, "movable")
        api.add_pdb("shop", "guarded", match_labels={"app": "guarded"}, disruptions_allowed=0)
        stack.values(0.1, 0.9)
        for _ in range(3):
            result = await stack.rebalancer.check()
            assert result is not None
            assert [d.pod.facts.name for d in result.moves] == ["movable"]
            if mode == "evict":
                break  # evicted: the pod is terminating from now on
        assert api.eviction_count("shop", "guarded-hot") == 0  # never asked: known held
        assert api.eviction_count("shop", "bare") == 0  # a rule protects it
        if mode == "dry-run":
            assert api.eviction_count("shop", "movable", dry_run=False) == 0
            assert {e["metadata"]["name"].rsplit("-", 1)[0] for e in api.events} == {"movable"}
        else:
            assert api.evictions == [("shop", "movable", "uid-movable")]
    finally:
        await stack.kube.close()


async def test_an_eviction_uses_its_budget_within_the_check(stack: Stack) -> None:
    api = stack.api
    settings_wide = settings(maxEvictionsPerCycle=5, maxEvictionsPerNode=5)
    stack.engine.install(stack.engine.snapshot, None, NOW, settings_wide)
    for i in range(3):
        app_pod(api, f"web-{i}", labels={"app": "web"})
    api.add_pdb("shop", "web", match_labels={"app": "web"}, disruptions_allowed=1)
    stack.values(0.1, 0.9)
    result = await stack.rebalancer.check()
    assert result is not None and [d.pod.facts.name for d in result.moves] == ["web-0"]
    held = [d.reason for d in result.decisions if d.outcome == "held"]
    assert held == [held[0]] * 2 and held[0].endswith(
        "PodDisruptionBudget web allows no disruption now"
    )
    assert len(api.evictions) == 1  # the two others were never asked about


@pytest.mark.parametrize(
    ("status", "details", "message", "reason"),
    [
        (429, {"causes": [{"reason": "DisruptionBudget"}]}, "needs 1 healthy pods", "budget"),
        (429, {"causes": [{"reason": "DisruptionBudget"}]}, "is still being processed",
         "budget-not-processed"),
        (429, {}, "Too many requests", "throttled"),
        (500, {}, "This pod has more than one PodDisruptionBudget, which the eviction "
         "subresource does not support.", "multiple-budgets"),
        (500, {}, "etcd is down", None),
        (404, {}, "not found", None),
    ],
)  # fmt: skip
def test_refusals_are_told_apart_from_failures(
    status: int, details: dict[str, Any], message: str, reason: str | None
) -> None:
    error = KubeError(message, status=status, details=details)
    assert refusal_reason(error) == reason
    assert eviction_outcome(error) == (
        "blocked" if reason else "gone" if status == 404 else "failed"
    )


async def test_a_pod_the_scheduler_left_unschedulable_keeps_its_room_from_a_move(
    api: FakeKubeAPI,
) -> None:
    """b (0.6 of 4 cores) has 1.2 cores under 0.9: room for the 0.5-core pod on hot a, or
    for the 1-core pod kube-scheduler left unschedulable; the waiting pod comes first. Once
    bound, it holds no room back and the move is made."""
    cpu = {
        "provider": "static",
        "static": {"nodes": {"a": {"cpu": 0.95}, "b": {"cpu": 0.6}}},
        "bind": {"enabled": False},
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "rebalance": {"mode": "evict", "sustain": 1, "margin": 3},
    }
    stack = Stack(api, parse_settings(cpu))
    try:
        stack.engine.install(make_snapshot({"cpu": {"a": 0.95, "b": 0.6}}), None, NOW)
        app_pod(api)
        api.add_pod("shop", "queued", "uid-queued", cpu_request="1", created=NOW - 60)
        api.unschedulable("shop", "queued", "0/2 nodes are available: 2 decice: cpu above 0.9.")
        held = await stack.rebalancer.check()
        assert held is not None and not held.moves and api.evictions == []
        assert "no other node has headroom for it" in held.decisions[0].reason
        api.assign("shop", "queued", "c")  # placed elsewhere: it waits no more
        moved = await stack.rebalancer.check()
        assert moved is not None and [d.target for d in moved.moves] == ["b"]
        assert api.evictions == [("shop", "app", "uid-app")]
    finally:
        await stack.kube.close()
