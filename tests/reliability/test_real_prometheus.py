"""The real service (subprocess) against a real Prometheus that the test stops and starts:
down at start-up, going down mid-run, coming back. The service never exits; /readyz and
decice_metric_age_seconds follow the truth; recovery needs no restart."""

from __future__ import annotations

import json
import math
import os
import select
import signal
from pathlib import Path

import pytest

from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import wait_until
from tests.harness.promharness import FakeExporter, PrometheusServer
from tests.harness.service import Service, running_service
from tests.harness.stack import extender_args, policy

MAX_AGE = 4.0


def age(svc: Service) -> float:
    _, body = svc.get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith('decice_metric_age_seconds{metric="cpu"}'):
            return float(line.split()[-1])
    raise AssertionError("no decice_metric_age_seconds")


def filtered(svc: Service) -> dict[str, str]:
    status, body = svc.post("/filter", extender_args("u-1", "p", ["node-1", "node-2"]))
    assert status == 200
    failed: dict[str, str] = json.loads(body)["FailedAndUnresolvableNodes"]
    return failed


@pytest.mark.parametrize("api", [None, "late"], ids=["no-api-server", "api-server-late"])
def test_prometheus_down_at_start_up_then_mid_run(
    exporter: FakeExporter, prometheus: PrometheusServer, tmp_path: Path, api: str | None
) -> None:
    """`api-server-late`: the API server (the loopback fake, node-1 and node-2 of 4 cores)
    is away too when the service starts; it comes back before Prometheus does, and the
    service knows the nodes within a second: a metric outage and an API outage together."""
    exporter.set("node-1", 0.2)
    exporter.set("node-2", 0.95)
    env = {"PROMETHEUS_URL": prometheus.url}
    kube = FakeKubeAPI(token="t") if api else None
    if kube is not None:
        kube.start()
        for i, node in enumerate(("node-1", "node-2"), 1):
            kube.add_node(node, f"10.0.0.{i}", cpu="4")
        env["KUBECONFIG"] = str(write_kubeconfig(tmp_path / "kubeconfig", kube.url, "t"))
        kube.go_away()
    try:
        run_story(prometheus, tmp_path, env, kube)
    finally:
        if kube is not None:
            kube.stop()


def run_story(
    prometheus: PrometheusServer, tmp_path: Path, env: dict[str, str], kube: FakeKubeAPI | None
) -> None:
    raw = policy(
        provider="prometheus",
        prometheus={"url": "http://unused:1", "interval": 0.5, "timeout": 1, "maxBackoff": 2},
        metrics=[
            {
                "name": "cpu",
                "query": "decice_node_cpu",
                "filter": {"above": 0.9},
                "onMissing": "fail-closed",
                "maxAge": MAX_AGE,
            }
        ],
        bind={"enabled": False},
    )
    prometheus.stop()
    with running_service(raw, tmp_path, env) as svc:
        # down at start-up: serving and ready (it can answer), but its data is not (the
        # probe stays green through an outage: /readyz/data says it), every node filtered
        # (fail-closed), age +Inf
        assert svc.get("/readyz")[0] == 200
        assert svc.get("/readyz/data")[0] == 503
        assert age(svc) == math.inf
        failed = filtered(svc)
        assert (
            set(failed) == {"node-1", "node-2"} and failed["node-1"] == "decice: cpu data missing"
        )

        if kube is not None:
            assert json.loads(svc.get("/readyz")[1])["nodeCacheSynced"] is False
            kube.come_back()
            wait_until(
                lambda: json.loads(svc.get("/readyz")[1])["nodeCacheSynced"],
                5,
                "the service knows the nodes (it retries every second until its first list)",
            )
            assert set(filtered(svc)) == {"node-1", "node-2"}  # still no data: fail-closed
        prometheus.start()
        # (ready comes first: a fresh but still empty answer, before the first scrape)
        wait_until(lambda: set(filtered(svc)) == {"node-2"}, 30, "data after Prometheus started")
        assert svc.get("/readyz/data")[0] == 200
        assert age(svc) < MAX_AGE

        # going down mid-run: last values serve until maxAge, then fail-closed filters
        prometheus.stop()
        assert set(filtered(svc)) == {"node-2"}
        wait_until(
            lambda: svc.get("/readyz/data")[0] == 503, MAX_AGE + 30, "data not ready after maxAge"
        )
        assert svc.get("/readyz")[0] == 200
        # not ready only once the last values aged past maxAge (the age says so, whatever
        # the machine's load did to the wall clock in between)
        assert age(svc) > MAX_AGE
        failed = filtered(svc)
        assert (
            set(failed) == {"node-1", "node-2"}
            and failed["node-1"] == f"decice: cpu data older than {MAX_AGE:g}s"
        )
        _, ready = svc.get("/readyz")
        assert json.loads(ready)["metrics"]["cpu"]["error"]

        # back: recovers without a restart, within the back-off ceiling plus a scrape
        prometheus.start()
        wait_until(lambda: set(filtered(svc)) == {"node-2"}, 30, "data after Prometheus came back")
        assert svc.get("/readyz")[0] == 200
        assert svc.alive()
        log = svc.stderr()
    assert "Traceback" not in log, log[-3000:]
    assert "metric cpu: refresh failed" in log


def fetch_processes(pid: int) -> list[int]:
    """The service's metrics fetch process(es): its children started by multiprocessing's
    spawn (not its resource tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                found.append(int(child))
    return found


def test_the_fetch_process_killed_mid_run_then_at_shutdown(
    exporter: FakeExporter, prometheus: PrometheusServer, tmp_path: Path
) -> None:
    """Every answer decoded in the child process (childProcessAbove 0). SIGKILL on the
    child: one refresh fails and keeps the last values, the next starts a new child and
    sees the change; a SIGTERMed service leaves no child behind."""
    exporter.set("node-1", 0.2)
    exporter.set("node-2", 0.95)
    raw = policy(
        provider="prometheus",
        prometheus={"url": "http://unused:1", "interval": 0.5, "childProcessAbove": 0},
        metrics=[{"name": "cpu", "query": "decice_node_cpu", "filter": {"above": 0.9}}],
        bind={"enabled": False},
    )
    with running_service(raw, tmp_path, {"PROMETHEUS_URL": prometheus.url}) as svc:
        wait_until(lambda: set(filtered(svc)) == {"node-2"}, 30, "data through the child")
        (child,) = fetch_processes(svc.pid)
        os.kill(child, signal.SIGKILL)
        exporter.set("node-1", 0.95)
        exporter.set("node-2", 0.2)
        wait_until(lambda: set(filtered(svc)) == {"node-1"}, 30, "data through a new child")
        (new,) = fetch_processes(svc.pid)
        assert new != child
        assert svc.get("/readyz")[0] == 200
        watch = os.pidfd_open(new)
        try:
            assert svc.stop() == 0
            exited, _, _ = select.select([watch], [], [], 10.0)
            assert exited, "the fetch process outlived the service"
        finally:
            os.close(watch)
        log = svc.stderr()
    assert "Traceback" not in log, log[-3000:]
    assert "the metrics fetch process exited" in log
