"""The chart with named policies (`policy.policies`): the scheduler's verbs and the stale-data
alert follow the metrics of every policy, not only `policy.metrics`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.policy.loading import parse_text
from extender.policy.settings import Settings
from tests.deploy.chart import render_mod

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "decice-extender"
NAMESPACE = "decice-system"


def _metric(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "query": f"{name}_usage", **extra}


def _values(policies: dict[str, Any], default: str) -> dict[str, Any]:
    return {
        # values merge with the chart's: null removes its default single-policy metrics
        "policy": {"metrics": None, "policies": policies, "defaultPolicy": default},
        "metrics": {"prometheusRule": {"enabled": True}},
    }


def _objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)
    return [yaml.safe_load(doc) for doc in render_mod.documents(rendered)]


def _find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (hit,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return hit


def _extender_entry(objs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = _find(objs, "ConfigMap", f"{RELEASE}-scheduler-config")
    (text,) = cm["data"].values()
    (entry,) = yaml.safe_load(text)["extenders"]
    return entry  # type: ignore[no-any-return]


def _settings(objs: list[dict[str, Any]]) -> Settings:
    cm = _find(objs, "ConfigMap", f"{RELEASE}-policy")
    return parse_text(cm["data"]["extender.yaml"], {}, "rendered policy")


def _stale_threshold(objs: list[dict[str, Any]]) -> str:
    rule = _find(objs, "PrometheusRule", RELEASE)
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            if r.get("alert") == "DeciceMetricDataStale":
                return str(r["expr"]).strip().rsplit(" > ", 1)[1]
    raise AssertionError("no DeciceMetricDataStale alert")


TWO_POLICIES = {
    "batch": {
        "description": "CPU only, never filters",
        "metrics": [_metric("cpu", maxAge=30)],
    },
    "memory-heavy": {
        "metrics": [_metric("memory", filter={"above": 0.85}, maxAge=120), _metric("cpu")],
    },
}


def test_a_filter_in_a_second_policy_turns_on_filter_and_preempt() -> None:
    objs = _objects(_values(TWO_POLICIES, "batch"))
    entry = _extender_entry(objs)
    assert entry["filterVerb"] == "filter" and entry["preemptVerb"] == "preempt"
    assert entry["prioritizeVerb"] == "prioritize" and entry["bindVerb"] == "bind"
    settings = _settings(objs)
    assert list(settings.policy_map) == ["batch", "memory-heavy"]
    assert settings.default.name == "batch"
    assert settings.filters_anything  # the extender agrees with the chart


def test_the_stale_alert_takes_the_largest_max_age_of_all_policies() -> None:
    assert _stale_threshold(_objects(_values(TWO_POLICIES, "batch"))) == "120"


@pytest.mark.parametrize(
    ("memory", "filters"),
    [
        pytest.param({}, False, id="no-filter-anywhere"),
        pytest.param({"onMissing": "fail-closed"}, True, id="fail-closed-in-second-policy"),
    ],
)
def test_filter_verbs_follow_every_policy(memory: dict[str, Any], filters: bool) -> None:
    policies = {
        "batch": {"metrics": [_metric("cpu")]},
        "memory-heavy": {"metrics": [_metric("memory", **memory), _metric("cpu")]},
    }
    objs = _objects(_values(policies, "memory-heavy"))
    entry = _extender_entry(objs)
    assert ("filterVerb" in entry) is filters
    assert ("preemptVerb" in entry) is filters
    assert _settings(objs).filters_anything is filters
    assert _stale_threshold(objs) == "60"  # each metric's default maxAge
