"""`decice-extender scheduler-config`: the scheduler's extenders entry that fits a policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.cli import main

NODES = {"nodes": {"node-1": {"cpu": 0.2}}}


def write_policy(tmp_path: Path, **policy: Any) -> str:
    raw: dict[str, Any] = {"provider": "static", "static": NODES, "bind": {"enabled": False}}
    raw.update(policy)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(["scheduler-config", *argv]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def entry(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    doc = run(capsys, *argv)
    assert list(doc) == ["extenders"]
    assert len(doc["extenders"]) == 1
    out: dict[str, Any] = doc["extenders"][0]
    return out


def test_a_filtering_policy_asks_for_filter_and_prioritize(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu", "filter": {"above": 0.9}}])
    e = entry(capsys, "--config", config)
    assert e["urlPrefix"] == "http://127.0.0.1:8888"
    assert e["filterVerb"] == "filter"
    assert e["prioritizeVerb"] == "prioritize"
    assert e["nodeCacheCapable"] is True
    assert e["weight"] == 1
    assert e["httpTimeout"] == "5s"
    assert e["ignorable"] is False
    assert e["enableHTTPS"] is False
    assert "bindVerb" not in e


def test_fail_closed_without_threshold_still_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu", "onMissing": "fail-closed"}])
    assert entry(capsys, "--config", config)["filterVerb"] == "filter"


def test_no_filter_verb_when_the_policy_filters_nothing_and_fails_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}, {"name": "memory"}])
    e = entry(capsys, "--config", config)
    assert "filterVerb" not in e
    assert e["prioritizeVerb"] == "prioritize"
    assert e["nodeCacheCapable"] is True


def test_bind_verb_only_when_binding_is_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}], bind={"enabled": True})
    assert entry(capsys, "--config", config)["bindVerb"] == "bind"
    config = write_policy(tmp_path, metrics=[{"name": "cpu"}], bind={"enabled": False})
    assert "bindVerb" not in entry(capsys, "--config", config)


def test_weight_timeout_and_host_from_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_policy(
        tmp_path,
        metrics=[{"name": "cpu"}],
        server={"host": "0.0.0.0", "port": 9443, "urlPrefix": "/decice"},
    )
    argv = ["--config", config, "--weight", "5", "--http-timeout", "2s"]
    e = entry(capsys, *argv, "--host", "decice.kube-system.svc")
    assert e["weight"] == 5
    assert e["httpTimeout"] == "2s"
    assert e["urlPrefix"] == "http://decice.kube-system.svc:9443/decice"
    # Without --host, a wildcard listen address becomes loopback.
    assert entry(capsys, *argv)["urlPrefix"] == "http://127.0.0.1:9443/decice"


def test_full_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_policy(
        tmp_path,
        schedulerNames=["decice_sched", "other"],
        metrics=[{"name": "cpu", "filter": {"above": 0.9}}],
        bind={"enabled": True},
    )
    doc = run(capsys, "--config", config, "--full", "--weight", "3")
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in doc["profiles"]] == ["decice_sched", "other"]
    [e] = doc["extenders"]
    assert e["weight"] == 3
    assert e["filterVerb"] == "filter"
    assert e["bindVerb"] == "bind"
    assert e["nodeCacheCapable"] is True


def test_invalid_policy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("metrics: []\nprovider: static\n")
    assert main(["scheduler-config", "--config", str(path)]) == 2
    assert "invalid configuration" in capsys.readouterr().err
