"""The console script: check-config, scores, and serve as a real process on the demo policy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
import yaml

from extender.cli.main import main
from tests.harness.fixtures import fixture_bytes
from tests.harness.loopback import free_port, wait_until
from tests.harness.service import running_service

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "config" / "demo.yaml")


def test_check_config_ok_and_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", DEMO]) == 0
    assert "ok (static provider; metrics cpu, memory)" in capsys.readouterr().out
    two = tmp_path / "two.yaml"
    two.write_text(
        yaml.safe_dump(
            {
                "provider": "static",
                "static": {"nodes": {"n": {"cpu": 0.1}}},
                "bind": {"enabled": False},
                "defaultPolicy": "b",
                "policies": {
                    "a": {"metrics": [{"name": "cpu"}]},
                    "b": {"metrics": [{"name": "cpu", "weight": 2}]},
                },
            }
        )
    )
    assert main(["check-config", "--config", str(two)]) == 0
    assert "ok (static provider; policies a: cpu; b (default): cpu)" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics:\n  - name: cpu\n    wieght: 2\nserver: {port: -1}\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err
    assert "metrics[0].wieght: unknown key" in err
    assert "server.port: Input should be greater than or equal to 0 (got -1)" in err


def test_scores_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scores", "--config", DEMO]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NODE", "CPU", "NORM", "MEMORY", "NORM", "SCORE", "FILTER"]
    row = dict(line.split(None, 1) for line in lines[1:])
    assert row["node-3"].split()[:5] == ["0.1", "0.90", "0.2", "0.80", "9"]
    assert "FAIL decice: cpu above 0.9" in row["node-5"]


def test_serve_demo_as_a_process(tmp_path: Path) -> None:
    """`decice-extender serve` on the demo policy, as scripts/demo runs it (the helper
    picks a free port and starts again on another one if the port was taken meanwhile).
    DECICE_KUBE_PROCESS, a setting that was removed, is named in a warning and changes
    nothing."""
    demo = yaml.safe_load(Path(DEMO).read_text())
    with running_service(demo, tmp_path, env={"DECICE_KUBE_PROCESS": "1"}) as svc:
        assert "DECICE_KUBE_PROCESS is no longer read" in svc.stderr()
        request = urllib.request.Request(
            f"{svc.url}/prioritize",
            data=fixture_bytes("prioritize-nodecache.json"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.headers["Server-Timing"].startswith("app;dur=")
            scores = {h["Host"]: h["Score"] for h in orjson.loads(response.read())}
        assert scores == {"node-1": 6, "node-2": 4, "node-3": 9, "node-4": 6, "node-5": 3}
        assert svc.stop() == 0


def _status(url: str, method: str = "GET") -> int:
    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_serve_with_a_metrics_listener_keeps_the_verbs_off_it(tmp_path: Path) -> None:
    """server.metricsPort: a second listener with /metrics, /healthz and /readyz only; the
    verbs (bind above all) answer on the loopback listener and nowhere else."""
    demo = yaml.safe_load(Path(DEMO).read_text())
    metrics_port = free_port()
    demo["server"] = {**demo.get("server", {}), "metricsPort": metrics_port}
    demo["server"]["metricsHost"] = "127.0.0.1"  # tests listen on loopback only
    with running_service(demo, tmp_path) as svc:
        base = f"http://127.0.0.1:{metrics_port}"
        wait_until(lambda: _status(f"{base}/healthz") == 200, 30, "the metrics listener")
        assert _status(f"{base}/readyz") == 200
        assert _status(f"{base}/metrics") == 200
        for verb in ("filter", "prioritize", "bind", "preempt"):
            assert _status(f"{base}/{verb}", "POST") == 404, verb
            assert _status(f"{svc.url}/{verb}", "POST") == 400, verb  # {} is a bad body
        assert _status(f"{base}/explain?uid=x") == 404
        assert _status(f"{svc.url}/metrics") == 200  # still beside the verbs on loopback
        assert svc.stop() == 0


def test_serve_refuses_to_expose_bind_without_mutual_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    demo = yaml.safe_load(Path(DEMO).read_text())
    policy.write_text(yaml.safe_dump({**demo, "bind": {"enabled": True}}))
    assert main(["serve", "--config", str(policy), "--host", "0.0.0.0"]) == 2
    assert "--host: '0.0.0.0' would let anyone who reaches this pod bind pods" in (
        capsys.readouterr().err
    )


def test_scheduler_config_with_mutual_tls_prints_a_tls_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "tls.yaml"
    policy.write_text(
        "server: {port: 9443, tls: {certFile: /c.pem, keyFile: /k.pem, clientCAFile: /ca.pem}}\n"
    )
    assert main(["scheduler-config", "--config", str(policy)]) == 0
    entry = yaml.safe_load(capsys.readouterr().out)["extenders"][0]
    assert entry["urlPrefix"] == "https://127.0.0.1:9443"
    assert entry["enableHTTPS"] is True
    assert set(entry["tlsConfig"]) == {"serverName", "caFile", "certFile", "keyFile"}


def test_explain_prints_the_decision_of_a_running_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = yaml.safe_load(Path(DEMO).read_text())
    with running_service(demo, tmp_path) as svc:
        status, _ = svc.request("POST", "/filter", fixture_bytes("filter-nodecache.json"))
        assert status == 200
        assert main(["explain", "decice/with-requests", "--url", svc.url]) == 0
        out = capsys.readouterr().out
        assert main(["explain", "decice/with-requests", "--url", svc.url, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert main(["explain", "decice/nobody", "--url", svc.url]) == 1
        assert "404: no decision recorded for pod decice/nobody" in capsys.readouterr().err
    lines = out.splitlines()
    assert lines[0].startswith("pod decice/with-requests (uid 9e764942-")
    assert "5 candidates, 1 filtered" in lines[1]
    assert lines[2].strip() == "1 x decice: cpu above 0.9"
    table = lines[4:]
    assert table[0].split() == ["NODE", "CPU", "NORM", "MEMORY", "NORM", "SCORE", "FILTER"]
    assert table[1].split()[:6] == ["node-3", "0.1", "0.90", "0.2", "0.80", "9"]  # best first
    assert table[-1].split(None, 6)[-1] == "FAIL decice: cpu above 0.9 (cpu=0.95 > 0.9)"
    assert doc["filteredBy"] == {"decice: cpu above 0.9": 1}
    assert main(["explain", "decice/x", "--url", "http://127.0.0.1:1"]) == 1
    assert "cannot reach" in capsys.readouterr().err
