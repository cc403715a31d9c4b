"""Overload taints against the loopback API server (tests/harness/kubeapi.py answers node
patches as patch-node-*.json show the real server doing): tainted when hot for forSeconds,
untainted when cool as long, capped at maxTaintedFraction, nothing on missing data,
someone else's taint kept through a conflict, no write without the lease, reconciled on
start, removed on a graceful stop, dry-run, and the whole service wired with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from extender.cluster.client import KubeClient
from extender.cluster.overload import Tainter
from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.nodes import NodeCache, node_info
from extender.decisions.overload import TAINT_KEY
from extender.metrics.providers import StaticProvider
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import build_service
from tests.harness.kubeapi import FakeKubeAPI, client_for

T0 = 1_800_000_000.0
FOR = 120.0
OTHER = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


def settings(**overload: Any) -> Settings:
    return parse_settings(
        {
            "provider": "static",
            "static": {"nodes": {"n": {"cpu": 0.5}}},
            "metrics": [{"name": "cpu", "filter": {"above": 0.9}, "maxAge": 60}],
            "bind": {"enabled": False},
            "overload": {"enabled": True, "forSeconds": FOR, "patchesPerSecond": 1000, **overload},
        }
    )


class Lease:
    def __init__(self) -> None:
        self.is_leader = True

    async def run(self) -> None:
        pass

    def detail(self) -> dict[str, object]:
        return {"leading": self.is_leader}


class Rig:
    """A Tainter over the fake API server; the test moves the clock and the values, and
    the node cache follows the server as a node watch would."""

    def __init__(self, api: FakeKubeAPI, s: Settings, names: list[str]) -> None:
        self.api = api
        self.now = T0
        self.names = names
        self.engine = Engine(s, Snapshot.empty(["cpu"]), T0)
        self.nodes = NodeCache()
        self.kube = KubeClient(client_for(api), timeout=2.0, retries=0)
        self.lease = Lease()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.tainter = Tainter(
            self.engine,
            self.nodes,
            self.kube,
            self.lease,
            lambda action, outcome: self.counts.update([(action, outcome)]),
            lambda: self.now,
        )

    async def at(self, offset: float, values: dict[str, float], error: str | None = None) -> Any:
        """A refresh at T0 + offset with these values, then one check."""
        self.now = T0 + offset
        series = MetricSeries(values, self.now, error)
        self.engine.install(Snapshot({"cpu": series}, self.now, int(self.now)), None, self.now)
        self.nodes.replace(node_info(n) for n in self.api.nodes())
        return await self.tainter.check()

    def taints(self, node: str) -> list[dict[str, Any]]:
        doc = self.api.node(node)
        assert doc is not None
        return list(doc["spec"].get("taints") or [])

    def tainted(self) -> set[str]:
        return {n for n in self.names if any(t["key"] == TAINT_KEY for t in self.taints(n))}


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    with FakeKubeAPI() as api:
        names = [f"node-{i}" for i in range(1, 5)]
        for i, name in enumerate(names, start=1):
            api.add_node(name, f"10.0.0.{i}", cpu="4")
        made = Rig(api, settings(), names)
        yield made
        await made.kube.close()


async def test_hot_for_for_seconds_tainted_then_cool_as_long_untainted(rig: Rig) -> None:
    rig.api.taint_node("node-1", **OTHER)  # someone else's: kept exactly
    hot = {"node-1": 0.95, "node-2": 0.3, "node-3": 0.3, "node-4": 0.3}
    await rig.at(0, hot)
    assert rig.tainted() == set()
    await rig.at(FOR, hot)
    assert rig.tainted() == {"node-1"}
    assert rig.taints("node-1") == [
        OTHER,
        {"key": TAINT_KEY, "value": "cpu", "effect": "NoSchedule"},
    ]
    patch = rig.api.requests_to("PATCH", "/api/v1/nodes/node-1")[0]
    assert patch.headers["content-type"] == "application/json-patch+json"
    assert patch.body[0]["op"] == "test" and patch.body[0]["path"] == "/metadata/resourceVersion"
    [event] = [e for e in rig.api.events if e["reason"] == "Overloaded"]
    assert event["metadata"]["namespace"] == "default" and event["type"] == "Warning"
    assert event["regarding"]["kind"] == "Node" and event["regarding"]["name"] == "node-1"
    assert event["note"].startswith("cpu=0.95 above 0.9 for 120s: tainted decice.io/overloaded=cpu")

    cool = {**hot, "node-1": 0.5}
    await rig.at(FOR + 15, cool)
    assert rig.tainted() == {"node-1"}
    await rig.at(2 * FOR + 15, cool)
    assert rig.tainted() == set() and rig.taints("node-1") == [OTHER]
    assert any(e["reason"] == "OverloadCleared" for e in rig.api.events)
    assert rig.counts == {("taint", "done"): 1, ("untaint", "done"): 1}


async def test_ten_of_twenty_hot_gives_six_tainted_the_hottest() -> None:
    with FakeKubeAPI() as api:
        names = [f"n{i:02d}" for i in range(20)]
        for i, name in enumerate(names):
            api.add_node(name, f"10.0.1.{i}", cpu="4")
        rig = Rig(api, settings(maxTaintedFraction=0.3), names)
        try:
            values = {n: 0.4 for n in names}
            for i in range(10):
                values[f"n{i:02d}"] = 0.91 + i / 200
            await rig.at(0, values)
            await rig.at(FOR, values)
            assert rig.tainted() == {f"n{i:02d}" for i in (4, 5, 6, 7, 8, 9)}
            await rig.at(FOR + 30, values)
            assert len(rig.tainted()) == 6
        finally:
            await rig.kube.close()


async def test_prometheus_down_changes_nothing(rig: Rig) -> None:
    hot = {"node-1": 0.95, "node-2": 0.3, "node-3": 0.3, "node-4": 0.3}
    await rig.at(0, hot)
    await rig.at(FOR, hot)
    assert rig.tainted() == {"node-1"}
    # The refreshes fail from now on: the snapshot keeps the last values, with the error.
    cool = {**hot, "node-1": 0.1, "node-2": 0.99}
    for offset in (FOR + 15, 3 * FOR, 10 * FOR):
        assert await rig.at(offset, cool, error="connection refused") == []
    assert rig.tainted() == {"node-1"}
    assert not [r for r in rig.api.requests if r.method == "PATCH" and "node-2" in r.path]


async def test_a_conflicting_writer_is_read_again_and_its_taint_kept(rig: Rig) -> None:
    hot = {"node-2": 0.95, "node-1": 0.3, "node-3": 0.3, "node-4": 0.3}
    await rig.at(0, hot)
    # Between our read and our patch another writer adds its taint: our test op fails
    # (422, as patch-node-taint-stale.json), we read the node again and patch that.
    kube_get = rig.kube.get_node
    raced = False

    async def get_then_race(name: str) -> dict[str, Any]:
        nonlocal raced
        doc = await kube_get(name)
        if not raced:
            raced = True
            rig.api.taint_node(name, **OTHER)
        return doc

    rig.kube.get_node = get_then_race  # type: ignore[method-assign]
    await rig.at(FOR, hot)
    assert rig.taints("node-2") == [
        OTHER,
        {"key": TAINT_KEY, "value": "cpu", "effect": "NoSchedule"},
    ]
    statuses = [r.path for r in rig.api.requests if r.method == "PATCH"]
    assert len(statuses) == 2  # the refused one, then the one on the node read again


async def test_a_lost_lease_stops_writes(rig: Rig) -> None:
    hot = {"node-1": 0.95, "node-2": 0.95, "node-3": 0.3, "node-4": 0.3}
    await rig.at(0, hot)
    rig.lease.is_leader = False
    assert await rig.at(FOR, hot) == []
    assert rig.tainted() == set()
    assert not [r for r in rig.api.requests if r.method == "PATCH"]


async def test_a_restart_reconciles_and_a_graceful_stop_removes(rig: Rig) -> None:
    taint = {"key": TAINT_KEY, "value": "cpu", "effect": "NoSchedule"}
    for node in ("node-1", "node-2"):  # left by an earlier writer
        rig.api.taint_node(node, **{k: taint[k] for k in ("key", "value", "effect")})
    # node-1 is still hot: kept; node-2 is not: removed at once (no forSeconds wait).
    await rig.at(0, {"node-1": 0.95, "node-2": 0.5, "node-3": 0.3, "node-4": 0.3})
    assert rig.tainted() == {"node-1"}
    rig.nodes.replace(node_info(n) for n in rig.api.nodes())
    assert await rig.tainter.remove_all() == 1
    assert rig.tainted() == set()


async def test_dry_run_changes_nothing(rig: Rig) -> None:
    rig.engine.settings = settings(mode="dry-run")
    hot = {"node-1": 0.95, "node-2": 0.3, "node-3": 0.3, "node-4": 0.3}
    await rig.at(0, hot)
    changes = await rig.at(FOR, hot)
    assert [(c.node, c.action) for c in changes] == [("node-1", "taint")]
    assert rig.tainted() == set() and rig.counts == {("taint", "dry-run"): 1}


async def test_the_service_wires_the_writer() -> None:
    with FakeKubeAPI() as api:
        api.add_node("node-1", "10.0.0.1", cpu="4")
        kube = KubeClient(client_for(api), timeout=2.0, retries=0)
        provider = StaticProvider({"node-1": {"cpu": 0.95}})
        service = build_service(settings(), provider=provider, kube=kube, overload_leader=Lease())
        transport = httpx.ASGITransport(app=service.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            ready = (await client.get("/readyz")).json()
            assert ready["overload"]["mode"] == "taint" and ready["overload"]["tainted"] == []
            metrics = (await client.get("/metrics")).text
            assert "decice_overload_tainted_nodes 0.0" in metrics
        # No Lease given: no writer (one replica writes, and only by election).
        alone = build_service(settings(), provider=provider, kube=kube)
        transport = httpx.ASGITransport(app=alone.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert "overload" not in (await client.get("/readyz")).json()
        await kube.close()
