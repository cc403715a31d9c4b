"""`decice-extender shadow` as a real process against the loopback API server, and
`decice-extender shadow-report` reading it: another scheduler's placements are judged,
and nothing is written to the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extender.cli.main import main
from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import wait_until_logged
from tests.harness.service import Service

NS = "web"
VALUES = {"node-a": {"cpu": 0.1}, "node-b": {"cpu": 0.5}, "node-c": {"cpu": 0.95}}


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
    with FakeKubeAPI(token="shadow-token") as api:
        for i, name in enumerate(VALUES, start=1):
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
            for name, node in (("p1", "node-a"), ("p2", "node-c")):
                api.add_pod(NS, name, f"uid-{name}", scheduler_name="default-scheduler")
                api.assign(NS, name, node)

            def judged() -> bool:
                return bool(json.loads(shadow.get("/shadow")[1])["seen"] == 2)

            wait_until_logged(judged, 30, "two placements judged", shadow.stderr)
            assert main(["shadow-report", "--url", shadow.url]) == 0
            out = capsys.readouterr().out
            assert "placements judged: 2" in out
            assert "on our best node                             50.0 % (1)" in out
            assert "decice: cpu above 0.9                      50.0 % (1)" in out
            assert "against our advice: node-c (1)" in out
            assert {r.method for r in api.requests} == {"GET"}  # read-only
        finally:
            shadow.kill()
