"""Shadow mode (`build_shadow`) against the loopback API server: placements
another scheduler makes are judged from the pod watch, counted in /metrics, summed up at
/shadow, explained at /explain, and watched for exceedance over the refreshes after them;
it writes nothing; its memory stays bounded over 100,000 assignments."""

from __future__ import annotations

import datetime
import gc
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from extender.cli.report import report_text
from extender.cluster.client import KubeClient
from extender.cluster.podwatch import PodEventHandler
from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.nodes import NodeCache, node_info
from extender.metrics.providers import StaticProvider
from extender.service.compose import Service, build_shadow
from extender.service.shadow_mode import ShadowObserver
from tests.harness.fixtures import make_settings
from tests.harness.kubeapi import FakeKubeAPI, client_for
from tests.harness.loopback import wait_until

NS = "web"
# The report of this test's three placements, as README.md shows it.
README_REPORT = """placements judged: 3 (the last 3 below)
  on our best node                             33.3 % (1)
  in our top 3 (not the best)                  33.3 % (1)
  on another node our filter passes            0.0 % (0)
  on a node our filter rejects                 33.3 % (1)
    decice: cpu above 0.9                      33.3 % (1)
  onto nodes over the cpu threshold            33.3 %
  median score gap (our best - chosen, 0..10)  3
nodes most often chosen against our advice: node-c (1)
exceedance: the chosen node over the threshold (cpu above 0.9) within 5 min after, since the start
  on our best node                   0.0 % (0 of 1)
  in our top 3 (not the best)        0.0 % (0 of 1)
  on another node our filter passes  - (0 of 0)
  on a node our filter rejects       100.0 % (1 of 1)
  all placements                     33.3 % (1 of 3)
  not counted: 0 in their window still, 0 with no fresh data in it, 0 let go (over shadow.keep)"""
VALUES = {"node-a": {"cpu": 0.1}, "node-b": {"cpu": 0.5}, "node-c": {"cpu": 0.95}}


def policy(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "prometheus": {"interval": 3600},
        "kubernetes": {"watchTimeout": 5},
        "shadow": {"schedulerNames": ["default-scheduler"]},
    }
    raw.update(overrides)
    return raw


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as server:
        for i, name in enumerate(VALUES, start=1):
            server.add_node(name, f"10.0.0.{i}", cpu="4")
        yield server


@pytest.fixture
def clock() -> list[float]:
    """The shadow's clock, moved by the test (the pod watch's and the refresher's)."""
    return [time.time()]


@pytest.fixture
def shadow(api: FakeKubeAPI, clock: list[float]) -> Iterator[tuple[Service, TestClient]]:
    kube = KubeClient(client_for(api), timeout=2, retries=0)
    service = build_shadow(
        make_settings(**policy()),
        provider=StaticProvider(VALUES),
        kube=kube,
        clock=lambda: clock[0],
    )
    with TestClient(service.app) as client:
        wait_until(
            lambda: all(i.status.watching for i in service.informers), 30, "the watches are up"
        )
        yield service, client


def test_placements_of_another_scheduler_are_judged_and_nothing_is_written(
    api: FakeKubeAPI, shadow: tuple[Service, TestClient], clock: list[float]
) -> None:
    service, client = shadow
    assert service.shadow is not None
    for name, node in (("p1", "node-a"), ("p2", "node-b"), ("p3", "node-c")):
        api.add_pod(NS, name, f"uid-{name}", scheduler_name="default-scheduler")
        api.assign(NS, name, node)
    api.add_pod(NS, "ours", "uid-ours", scheduler_name="decice_sched")  # not selected
    api.assign(NS, "ours", "node-c")
    wait_until(lambda: service.shadow.log.seen == 3, 30, "three placements judged")  # type: ignore[union-attr]

    metrics = client.get("/metrics").text
    for verdict, count in (("best", 1), ("top3", 1), ("rejected", 1)):
        line = f'decice_shadow_assignments_total{{policy="default",verdict="{verdict}"}} {count}.0'
        assert line in metrics
    rejected = 'decice_shadow_rejected_total{policy="default",reason="decice: cpu above 0.9"} 1.0'
    assert rejected in metrics
    assert 'decice_shadow_score_gap_bucket{le="0.0",policy="default"} 1.0' in metrics

    # The refreshes after the placements: node-c, over the threshold, exceeded at once;
    # node-a and node-b stayed under it until their windows closed.
    for later in (15, 301):
        clock[0] += later
        client.portal.call(service.refresher.refresh_once)  # type: ignore[union-attr]
    metrics = client.get("/metrics").text
    for verdict, outcome, count in (
        ("rejected", "exceeded", 1),
        ("best", "under", 1),
        ("top3", "under", 1),
        ("best", "exceeded", 0),
        ("other", "dropped", 0),
    ):
        labels = f'outcome="{outcome}",policy="default",verdict="{verdict}"'
        assert f"decice_shadow_exceedance_total{{{labels}}} {count}.0" in metrics

    summary = client.get("/shadow").json()
    assert summary["verdicts"] == {"best": 1, "top3": 1, "other": 0, "rejected": 1}
    assert summary["exceedance"]["overall"] == {"judged": 3, "exceeded": 1, "share": 0.3333}
    assert summary["over"] == {"cpu": round(1 / 3, 4)}  # node-c, over the 0.9 threshold
    assert summary["againstAdvice"] == [{"node": "node-c", "placements": 1}]
    text = report_text(summary)
    assert text == README_REPORT
    assert README_REPORT in (Path(__file__).parents[2] / "README.md").read_text()

    explained = client.get("/explain", params={"pod": f"{NS}/p3"}).json()
    assert explained["placedOn"] == "node-c"
    assert explained["shadow"]["verdict"] == "rejected"
    assert explained["shadow"]["ourBest"] == "node-a"
    assert explained["shadow"]["scheduler"] == "default-scheduler"
    exceedance = explained["shadow"]["exceedance"]
    assert exceedance["outcome"] == "exceeded" and exceedance["value"] == 0.95
    assert exceedance["threshold"] == "cpu above 0.9"
    assert client.post("/filter", content=b"{}").status_code in (404, 405)  # no verbs
    # Read-only: lists and watches, nothing else.
    assert {r.method for r in api.requests} == {"GET"}
    assert client.get("/shadow", params={"over": "cpu=x"}).status_code == 400


def test_a_pod_the_node_selector_keeps_off_our_best_node(
    api: FakeKubeAPI, shadow: tuple[Service, TestClient]
) -> None:
    service, _ = shadow
    assert service.shadow is not None
    # node-b carries the pod's selected label: our best node for this pod is node-b.
    api.update_node("node-b", cpu="4")
    node = api.node("node-b")
    assert node is not None
    pod = api.add_pod(NS, "picky", "uid-picky", scheduler_name="default-scheduler")
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-b"}
    api.assign(NS, "picky", "node-b")
    wait_until(lambda: service.shadow.log.seen == 1, 30, "the placement judged")  # type: ignore[union-attr]
    [record] = list(service.shadow.log)
    assert record.judgement.verdict == "best" and record.judgement.best == "node-b"


def pod_doc(i: int, node: str, at: float) -> dict[str, Any]:
    stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": f"p{i}", "namespace": NS, "uid": f"uid-{i}"},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}],
        },
    }


def test_memory_stays_bounded_over_100000_assignments() -> None:
    names = [f"node-{i:03d}" for i in range(100)]
    # The herd guard off: what is measured is the shadow's own memory (the guard's
    # reservations expire with every refresh, tested elsewhere).
    settings = make_settings(
        **policy(shadow={"keep": 2000}, explain={"keepPods": 2000}),
        static={"nodes": {n: {"cpu": 0.4} for n in names}},
        herdGuard={"enabled": False},
    )
    now = 1_800_000_000.0

    def snapshot(at: float) -> Snapshot:
        values = {n: 0.2 + (i % 7) / 10 for i, n in enumerate(names)}
        return Snapshot({"cpu": MetricSeries(values, at)}, at, int(at))

    engine = Engine(settings, snapshot(now), now)
    nodes = NodeCache()
    nodes.replace(
        node_info({"metadata": {"name": n}, "status": {"allocatable": {"cpu": "8"}}}) for n in names
    )

    observer = ShadowObserver(engine, nodes, lambda policy, verdict, gap, reason: None)
    clock = [now]
    handler = PodEventHandler(engine, seen=observer, clock=lambda: clock[0])
    sizes = []
    for i in range(100_000):
        clock[0] = now + i / 200  # 200 placements a second: 500 s in all
        if i % 3000 == 0:  # a refresh every 15 s
            engine.install(snapshot(clock[0]), None, clock[0])
            observer.exceedances.installed(engine.snapshot)
        handler("MODIFIED", pod_doc(i, names[i % 100], clock[0]))
        # Pods come and go: some 2,000 hold a node at a time (the pod watch's filter keeps
        # the UIDs of the pods holding a node, cluster.watch_filter: bounded by those).
        if i >= 2000:
            handler("DELETED", pod_doc(i - 2000, names[(i - 2000) % 100], clock[0]))
        # The first size once every ring is full: the pod watch's log of counted UIDs
        # keeps twice the herd guard's span (settle 45 s + skew): 200 s of placements.
        if i in (40_000, 99_999):
            gc.collect()
            sizes.append(resident_bytes())
    assert observer.log.seen == 100_000 and len(observer.log) == 2000
    assert len(observer._latest) <= 2000 and len(engine.pods) <= 2000
    # 60,000 placements a 5-minute window: only the last 2,000 watched, the rest let go
    assert len(observer.exceedances) == 2000 and observer.exceedances.waiting <= 2000
    assert sum(observer.exceedances.counts.values()) + observer.exceedances.waiting == 100_000
    # After the rings filled, 60,000 more placements add no memory to speak of.
    assert sizes[1] - sizes[0] < 4_000_000, sizes


def resident_bytes() -> int:
    """This process's resident set, from /proc/self/statm (pages)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
