"""extender.policy.checks: what check-config catches beyond the file format."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extender.cli.main import main
from extender.policy.checks import policy_problems, query_problem
from extender.policy.fields import ConfigError
from tests.harness.fixtures import make_settings

ROOT = Path(__file__).resolve().parents[2]


def test_promql_that_does_not_parse_is_named() -> None:
    assert query_problem('max by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m]))') is None
    assert query_problem("max by (node (x)") is not None
    s = make_settings(provider="prometheus", metrics=[{"name": "cpu", "query": "sum(rate(x[5m])"}])
    [problem] = policy_problems(s, 5.0)
    assert problem.startswith("metrics[0](cpu).query: PromQL error: ")


def test_every_shipped_policy_passes() -> None:
    for path in sorted((ROOT / "config").glob("**/*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if not isinstance(raw, dict) or not {"metrics", "policies"} & raw.keys():
            continue  # scheduler configs, pods
        assert main(["check-config", "--config", str(path)]) == 0, path


def test_a_bind_budget_longer_than_the_scheduler_waits() -> None:
    s = make_settings(bind={"enabled": True, "timeout": 2, "retries": 2})
    assert s.bind.budget == pytest.approx(2 * 3 + 0.2 + 0.4)
    [problem] = policy_problems(s, 5.0)
    assert "is 6.6s, not under the scheduler's httpTimeout 5s" in problem
    assert policy_problems(s, 10.0) == []
    assert policy_problems(make_settings(bind={"enabled": True}), 5.0) == []  # 3.2s: fits
    assert policy_problems(make_settings(bind={"enabled": False, "timeout": 9}), 5.0) == []


def test_thresholds_that_reject_every_node_are_refused_when_loading() -> None:
    with pytest.raises(
        ConfigError, match=r"metrics\[0\]\.filter: above \(0\.2\) is less than below \(0\.5\)"
    ):
        make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.2, "below": 0.5}}])
    make_settings(metrics=[{"name": "cpu", "filter": {"above": 0.9, "below": 0.1}}])


def test_check_config_names_every_problem_and_takes_config_and_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "metrics": [{"name": "cpu", "query": "max by (node) (x"}],
                "bind": {"enabled": True, "timeout": 2, "retries": 2},
            }
        )
    )
    assert main(["check-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "PromQL error" in err and "not under the scheduler's httpTimeout 5s" in err
    assert main(["check-config", str(bad), "--http-timeout", "30s"]) == 2  # PromQL still bad
    assert "httpTimeout" not in capsys.readouterr().err
    assert main(["check-config"]) == 2
    assert "--config FILE" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == "decice-extender 0.1.0"
