"""What an operator meets in the first hour, rendered offline: the values files as they
stand on a cluster without the Prometheus Operator, the gating on its CRDs, kube-scheduler's
own metrics, the HA defaults with replicas > 1, and the per-node series' default. Installed
on a real API server: tests/e2e/test_chart_install.py."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.deploy.chart import render_mod, schema_problems
from tests.deploy.test_chart import CASES, CHART, NAMESPACE, RELEASE, find, values_for

OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
MONITORING = {
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "dashboard": {"enabled": True},
    }
}


def render(values: dict[str, Any], *, operator_crds: bool = True) -> list[dict[str, Any]]:
    out = render_mod.render_chart(
        values, name=RELEASE, namespace=NAMESPACE, operator_crds=operator_crds
    )
    return [yaml.safe_load(doc) for doc in render_mod.documents(out)]


def notes(values: dict[str, Any], *, operator_crds: bool = True) -> str:
    out = render_mod.render_chart(
        values, name=RELEASE, namespace=NAMESPACE, operator_crds=operator_crds
    )
    text: str = next(t for path, t in out.items() if path.endswith("NOTES.txt"))
    return text


@pytest.mark.parametrize("case", CASES)
def test_every_values_file_renders_and_validates_as_it_stands(case: str) -> None:
    """`helm template -f ci/<case>.yaml` on a cluster without the Prometheus Operator: no
    value added, every object valid against the Kubernetes 1.35 schemas (strict)."""
    objs = render(values_for(case), operator_crds=False)
    assert objs
    assert not {o["kind"] for o in objs} & OPERATOR_KINDS
    assert schema_problems(objs) == []


def test_operator_objects_need_the_crds_or_the_word_that_they_are_installed() -> None:
    absent = {o["kind"] for o in render(MONITORING, operator_crds=False)}
    assert not absent & OPERATOR_KINDS
    assert "ConfigMap" in absent  # the dashboard is a plain ConfigMap: kept
    assert "Not created: the ServiceMonitor and PrometheusRule" in notes(
        MONITORING, operator_crds=False
    )
    installed = {o["kind"] for o in render(MONITORING)}  # metrics.operatorCRDs: installed
    assert installed >= OPERATOR_KINDS
    assert "Not created" not in notes(MONITORING)
    helper = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    assert '.Capabilities.APIVersions.Has "monitoring.coreos.com/v1"' in helper
    for template in ("servicemonitor.yaml", "prometheusrule.yaml", "rebalancer-monitoring.yaml"):
        text = (CHART / "templates" / template).read_text(encoding="utf-8")
        assert 'include "decice-extender.operatorCRDs"' in text, template


def test_kube_scheduler_metrics_get_a_service_an_endpoint_and_rbac() -> None:
    objs = render({"metrics": {"serviceMonitor": {"enabled": True}}})
    service = find(objs, "Service", f"{RELEASE}-scheduler-metrics")
    deployment = find(objs, "Deployment", RELEASE)
    [scheduler] = [
        c
        for c in deployment["spec"]["template"]["spec"]["containers"]
        if c["name"] == "kube-scheduler"
    ]
    ports = {p["name"]: p["containerPort"] for p in scheduler["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in ports
    assert ports[service["spec"]["ports"][0]["targetPort"]] == 10259
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    endpoint = find(objs, "ServiceMonitor", RELEASE)["spec"]["endpoints"][1]
    assert (endpoint["port"], endpoint["scheme"]) == ("https-metrics", "https")
    assert find(objs, "ClusterRole", f"{RELEASE}-scheduler-metrics")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    names = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRoleBinding"}
    assert f"{RELEASE}-scheduler-metrics" not in names  # no account named: nothing bound
    # off: metrics.scheduler.enabled false; and mode: shadow has no kube-scheduler
    for values in (
        {"metrics": {"serviceMonitor": {"enabled": True}, "scheduler": {"enabled": False}}},
        {"mode": "shadow", "metrics": {"serviceMonitor": {"enabled": True}}},
    ):
        names = {o["metadata"]["name"] for o in render(values)}
        assert not {n for n in names if "scheduler-metrics" in n}, values
        endpoints = find(render(values), "ServiceMonitor", RELEASE)["spec"]["endpoints"]
        assert [e["port"] for e in endpoints] == ["http-metrics"]


def _pod(values: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    objs = render(values)
    return find(objs, "Deployment", RELEASE)["spec"], objs


def test_replicas_above_one_get_anti_affinity_a_surge_only_rollout_and_a_pdb() -> None:
    single, objs = _pod({})
    assert "strategy" not in single and "affinity" not in single["template"]["spec"]
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    double, objs = _pod({"replicas": 2})
    assert double["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    anti = double["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert list(anti) == ["preferredDuringSchedulingIgnoredDuringExecution"]  # never required
    assert find(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    # the operator's own choices win
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
        ]}]}}}  # fmt: skip
    chosen, objs = _pod(
        {"replicas": 2, "affinity": mine, "podDisruptionBudget": {"enabled": False}}
    )
    assert chosen["template"]["spec"]["affinity"] == mine
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    with pytest.raises(helm.HelmRenderError, match="needs replicas >= 2"):
        render({"podDisruptionBudget": {"enabled": True}})


def test_per_node_series_are_off_in_the_chart_and_on_in_the_policy_default() -> None:
    from extender.policy.sections import ExplainSettings

    assert ExplainSettings().node_metrics is True  # the policy's default (small clusters, the demo)
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["policy"]["explain"]["nodeMetrics"] is False
    policy = find(render({}), "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"]
    assert yaml.safe_load(policy)["explain"] == {"nodeMetrics": False}
