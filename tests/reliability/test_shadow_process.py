"""`decice-extender shadow` as a real process against the loopback API server, and
`decice-extender shadow-report` reading it: another scheduler's placements are judged,
and nothing is written to the API; with a real Prometheus, a chosen node going over the
threshold after a placement is counted as an exceedance."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.cli.main import main
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import wait_until_logged
from tests.harness.promharness import FakeExporter, PrometheusServer
from tests.harness.service import Service

NS = "web"
VALUES = {"node-a": {"cpu": 0.1}, "node-b": {"cpu": 0.5}, "node-c": {"cpu": 0.95}}


@contextlib.contextmanager
def running_shadow(
    policy: dict[str, Any], nodes: Iterable[str], tmp_path: Path
) -> Iterator[tuple[FakeKubeAPI, Service]]:
    """The shadow process behind a loopback API server with `nodes`, its watches up."""
    with FakeKubeAPI(token="shadow-token") as api:
        for i, name in enumerate(nodes, start=1):
            api.add_node(name, f"10.0.0.{i}", cpu="4")
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "shadow-token")
        shadow = Service(policy, tmp_path, {"KUBECONFIG": str(kubeconfig)}, mode="shadow")
        shadow.start()
        try:

            def watching() -> bool:
                status, body = shadow.get("/readyz")
                watches = json.loads(body).get("watches", {}) if status == 200 else {}
                return bool(watches) and all(w["watching"] for w in watches.values())

            wait_until_logged(watching, 30, "the shadow watches", shadow.stderr)
            yield api, shadow
            assert {r.method for r in api.requests} == {"GET"}  # read-only
        finally:
            shadow.kill()


def place(api: FakeKubeAPI, placements: Iterable[tuple[str, str]]) -> None:
    """Pods of "default-scheduler", each assigned to its node."""
    for name, node in placements:
        api.add_pod(NS, name, f"uid-{name}", scheduler_name="default-scheduler")
        api.assign(NS, name, node)


def test_the_shadow_judges_and_the_report_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = {
        "provider": "static",
        "static": {"nodes": VALUES},
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}}],
        "prometheus": {"interval": 3600},
        "shadow": {"schedulerNames": ["default-scheduler"]},
    }
    with running_shadow(policy, VALUES, tmp_path) as (api, shadow):
        place(api, (("p1", "node-a"), ("p2", "node-c")))

        def judged() -> bool:
            return bool(json.loads(shadow.get("/shadow")[1])["seen"] == 2)

        wait_until_logged(judged, 30, "two placements judged", shadow.stderr)
        assert main(["shadow-report", "--url", shadow.url]) == 0
        out = capsys.readouterr().out
        assert "placements judged: 2" in out
        assert "on our best node                             50.0 % (1)" in out
        assert "decice: cpu above 0.9                      50.0 % (1)" in out
        assert "against our advice: node-c (1)" in out


def test_the_shadow_counts_a_chosen_node_going_over_the_threshold_after(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    exporter: FakeExporter,
    prometheus: PrometheusServer,
) -> None:
    """With a real Prometheus: a placement on our best node, whose node then goes over the
    threshold, exceeded (as on a node already over it); one whose node stays cool waits out
    its window. /metrics, /shadow, /explain and shadow-report all say so."""
    cpu = {"node-a": 0.1, "node-b": 0.5, "node-c": 0.95}
    for node, value in cpu.items():
        exporter.set(node, value)
    prometheus.wait_for("decice_node_cpu", lambda r: len(r) == len(cpu))
    policy = {
        "provider": "prometheus",
        "prometheus": {"url": prometheus.url, "interval": 0.5, "timeout": 2, "maxBackoff": 1},
        "metrics": [{"name": "cpu", "query": "decice_node_cpu", "filter": {"above": 0.9}}],
        "herdGuard": {"enabled": False},
        "shadow": {"schedulerNames": ["default-scheduler"], "exceedanceWindow": 3600},
    }
    with running_shadow(policy, cpu, tmp_path) as (api, shadow):

        def metrics() -> str:
            return shadow.get("/metrics")[1].decode()

        def exceedance() -> dict[str, Any]:
            doc: dict[str, Any] = json.loads(shadow.get("/shadow")[1])["exceedance"]
            return doc

        wait_until_logged(
            lambda: 'decice_metric_nodes{metric="cpu"} 3.0' in metrics(),
            30,
            "the exporter's values",
            shadow.stderr,
        )
        place(api, (("p1", "node-a"), ("p2", "node-b"), ("p3", "node-c")))
        wait_until_logged(
            lambda: exceedance()["byVerdict"]["rejected"]["exceeded"] == 1,
            30,
            "the placement on node-c, already over, exceeded",
            shadow.stderr,
        )
        exporter.set("node-a", 0.97)  # our best node turns hot after the placement
        wait_until_logged(
            lambda: exceedance()["byVerdict"]["best"]["exceeded"] == 1,
            30,
            "the placement on node-a exceeded",
            shadow.stderr,
        )
        doc = exceedance()
        assert doc["overall"] == {"judged": 2, "exceeded": 2, "share": 1.0}
        assert doc["waiting"] == 1  # p2: node-b stays at 0.5, its window open an hour
        assert doc["thresholds"] == {"default": "cpu above 0.9"}
        exposed = metrics()
        for verdict, outcome, count in (
            ("best", "exceeded", 1),
            ("rejected", "exceeded", 1),
            ("top3", "exceeded", 0),
            ("top3", "under", 0),
        ):
            labels = f'outcome="{outcome}",policy="default",verdict="{verdict}"'
            assert f"decice_shadow_exceedance_total{{{labels}}} {count}.0" in exposed
        explained = json.loads(shadow.get(f"/explain?pod={NS}/p1")[1])["shadow"]
        assert explained["verdict"] == "best"
        assert explained["exceedance"]["outcome"] == "exceeded"
        assert explained["exceedance"]["value"] == 0.97
        waiting = json.loads(shadow.get(f"/explain?pod={NS}/p2")[1])["shadow"]
        assert waiting["exceedance"]["outcome"] == "waiting"

        assert main(["shadow-report", "--url", shadow.url]) == 0
        out = capsys.readouterr().out
        assert (
            "exceedance: the chosen node over the threshold (cpu above 0.9) within 60 min "
            "after, since the start\n"
        ) in out
        assert "  on our best node                   100.0 % (1 of 1)" in out
        assert "  on a node our filter rejects       100.0 % (1 of 1)" in out
        assert "  all placements                     100.0 % (2 of 2)" in out
        assert "  not counted: 1 in their window still, 0 with no fresh data" in out
