"""The Helm chart, rendered and checked offline: no helm binary, no cluster.

helm-python-sdk embeds the Helm v4 SDK (render, lint, values.schema.json checks);
kubernetes-validate holds the Kubernetes OpenAPI schemas (1.35 strict); the extender's
own loader reads the rendered policy, and the rendered scheduler config must call the
paths the extender serves.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from extender.cli.scheduler_config import scheduler_extender
from extender.policy.fields import ConfigError
from extender.policy.loading import load_settings
from extender.policy.settings import Settings
from extender.service.verbs import verb_paths
from tests.deploy.chart import KUBE_VERSION, render_mod, schema_problems

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "decice-extender"
RELEASE = "decice-extender"
NAMESPACE = "decice-system"
LEASE = "decice-scheduler"
CASES = ["default", *sorted(p.stem for p in (CHART / "ci").glob("*-values.yaml"))]

REQUIRED_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
}

# Fields of kubescheduler.config.k8s.io/v1 (k8s.io/kube-scheduler/config/v1/types.go).
SCHEDULER_CONFIG_KEYS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
    "healthzBindAddress", "metricsBindAddress", "enableProfiling", "enableContentionProfiling",
    "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles",
    "extenders", "delayCacheUntilActive",
}  # fmt: skip
LEADER_ELECTION_KEYS = {
    "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
    "resourceName", "resourceNamespace",
}  # fmt: skip
PROFILE_KEYS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
EXTENDER_KEYS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}  # fmt: skip
VERB_KEYS = {
    "filter": "filterVerb",
    "prioritize": "prioritizeVerb",
    "bind": "bindVerb",
    "preempt": "preemptVerb",
}


# --- helpers ---------------------------------------------------------------------------


def values_for(case: str) -> dict[str, Any]:
    if case == "default":
        return {}
    loaded = yaml.safe_load((CHART / "ci" / f"{case}.yaml").read_text(encoding="utf-8"))
    return loaded or {}


@cache
def _rendered(case: str) -> dict[str, str]:
    return render_mod.render_chart(values_for(case), name=RELEASE, namespace=NAMESPACE)  # type: ignore[no-any-return]


def rendered(case: str) -> dict[str, str]:
    return dict(_rendered(case))


def objects(case: str) -> list[dict[str, Any]]:
    return [yaml.safe_load(doc) for doc in render_mod.documents(rendered(case))]


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(hits) == 1, (
        f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in hits]}"
    )
    return hits[0]


def scheduler_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = find(objs, "ConfigMap", f"{RELEASE}-scheduler-config")
    loaded: dict[str, Any] = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    return loaded


def policy_text(objs: list[dict[str, Any]]) -> str:
    text: str = find(objs, "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"]
    return text


def containers(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}


def load_policy(objs: list[dict[str, Any]], tmp_path: Path) -> Settings:
    """The rendered extender.yaml, read by the extender's own loader (ConfigError lists all)."""
    path = tmp_path / "extender.yaml"
    path.write_text(policy_text(objs), encoding="utf-8")
    return load_settings(path, environ={})


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return loaded


def schema_errors(values: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(schema())
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(values)
    ]


#: The cases with a kube-scheduler (mode: extender): the scheduler config and its agreement
#: with the extender. ci/shadow-values.yaml (mode: shadow) has no scheduler: it is
#: checked in test_chart_shadow.py, and by every test over CASES here.
EXTENDER_CASES = [c for c in CASES if values_for(c).get("mode", "extender") == "extender"]


def test_only_the_shadow_case_runs_no_scheduler() -> None:
    assert sorted(set(CASES) - set(EXTENDER_CASES)) == ["shadow-values"]


# --- Helm: lint, render, schema -------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_helm_lint_strict(case: str) -> None:
    report = helm.lint(
        CHART, values_for(case), strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, json.dumps(report, indent=2)


def test_values_schema_is_draft7_and_strict_at_the_top() -> None:
    s = schema()
    jsonschema.Draft7Validator.check_schema(s)
    assert s["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert s["additionalProperties"] is False
    for key in ("scheduler", "extender", "policy", "metrics", "networkPolicy"):
        assert s["properties"][key]["additionalProperties"] is False, key


@pytest.mark.parametrize("case", ["values", *CASES[1:]])
def test_values_files_match_the_schema(case: str) -> None:
    path = CHART / ("values.yaml" if case == "values" else f"ci/{case}.yaml")
    values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if case != "values":
        with helm.Chart.load(CHART) as chart:
            values = chart.merge_values(values)  # what an install validates
    assert schema_errors(values) == []


BAD_VALUES = [
    pytest.param({"extender": {"port": "abc"}}, "/extender/port", id="port-not-a-number"),
    pytest.param({"extender": {"port": 70000}}, "/extender/port", id="port-out-of-range"),
    pytest.param({"replicaCount": 2}, "replicaCount", id="unknown-top-level-key"),
    pytest.param({"scheduler": {"extender": {"wieght": 2}}}, "wieght", id="typo-in-extender"),
    pytest.param({"policy": {"server": {"port": 9999}}}, "/policy/server", id="chart-owned-port"),
    pytest.param({"policy": {"bnid": {"enabled": False}}}, "bnid", id="typo-in-policy"),
    pytest.param({"policy": {"provider": "graphite"}}, "/policy/provider", id="unknown-provider"),
    pytest.param(
        {"scheduler": {"leaderElection": {"resourceName": "kube-scheduler"}}},
        "/scheduler/leaderElection/resourceName",
        id="lease-of-the-default-scheduler",
    ),
    pytest.param({"scheduler": {"extender": {"httpTimeout": "5"}}}, "httpTimeout", id="no-unit"),
    pytest.param({"extender": {"listenAddress": "10.0.0.1"}}, "listenAddress", id="pod-address"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "where"), BAD_VALUES)
def test_bad_values_fail_with_a_clear_message(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError) as caught:
            chart.render(values, name=RELEASE, namespace=NAMESPACE)
        merged = chart.merge_values(values)
    assert where in str(caught.value), str(caught.value)
    assert any(where.strip("/").split("/")[-1] in e for e in schema_errors(merged)), schema_errors(
        merged
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"podDisruptionBudget": {"enabled": True}}, "needs replicas >= 2"),
        ({"replicas": 2, "scheduler": {"leaderElection": {"enabled": False}}}, "leaderElection"),
    ],
)
def test_unsafe_combinations_are_refused(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmRenderError, match=message):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)


# --- Kubernetes schemas ---------------------------------------------------------------


def _check_service_monitor(obj: dict[str, Any], objs: list[dict[str, Any]]) -> None:
    """monitoring.coreos.com/v1 is a CRD kubernetes-validate has no schema for: check it here."""
    assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}
    spec = obj["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels"}
    selected = [
        o
        for o in objs
        if o["kind"] == "Service"
        and spec["selector"]["matchLabels"].items() <= o["metadata"]["labels"].items()
    ]
    assert selected, "the ServiceMonitor selects no Service"
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    for endpoint in spec["endpoints"]:
        keys = {
            "port",
            "path",
            "scheme",
            "interval",
            "scrapeTimeout",
            "bearerTokenFile",
            "tlsConfig",
        }
        assert set(endpoint) <= keys
        [service] = [
            s for s in selected if endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}
        ]
        assert endpoint["path"] == "/metrics"
        assert re.fullmatch(r"\d+[smh]", endpoint["interval"])
        if endpoint["scheme"] == "https":  # kube-scheduler's secure port, its own job
            assert service["metadata"]["name"].endswith("-scheduler-metrics")
            assert (
                endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
            )
            assert set(endpoint["tlsConfig"]) == {"insecureSkipVerify"}


@pytest.mark.parametrize("case", CASES)
def test_manifests_validate_against_kubernetes_schemas(case: str) -> None:
    objs = objects(case)
    for obj in objs:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            _check_service_monitor(obj, objs)
    assert schema_problems(objs) == []


def test_default_resources() -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects("default"))
    assert kinds == sorted(
        [
            ("ServiceAccount", RELEASE),
            ("ConfigMap", f"{RELEASE}-policy"),
            ("ConfigMap", f"{RELEASE}-scheduler-config"),
            ("ClusterRole", f"{RELEASE}-extender"),
            ("ClusterRoleBinding", f"{RELEASE}-extender"),
            ("ClusterRoleBinding", f"{RELEASE}-kube-scheduler"),
            ("ClusterRoleBinding", f"{RELEASE}-volume-scheduler"),
            ("Role", f"{RELEASE}-leader-election"),
            ("RoleBinding", f"{RELEASE}-leader-election"),
            ("RoleBinding", f"{RELEASE}-auth-reader"),
            ("Deployment", RELEASE),
            # The rebalancer, on by default (tests/deploy/test_chart_rebalancer.py).
            ("Deployment", f"{RELEASE}-rebalancer"),
            ("ServiceAccount", f"{RELEASE}-rebalancer"),
            ("ClusterRole", f"{RELEASE}-rebalancer"),
            ("ClusterRoleBinding", f"{RELEASE}-rebalancer"),
            ("Role", f"{RELEASE}-rebalancer-leader-election"),
            ("RoleBinding", f"{RELEASE}-rebalancer-leader-election"),
        ]
    )


@pytest.mark.parametrize("case", CASES)
def test_every_resource_carries_the_recommended_labels(case: str) -> None:
    for obj in objects(case):
        missing = REQUIRED_LABELS - set(obj["metadata"].get("labels", {}))
        assert not missing, f"{obj['kind']}/{obj['metadata']['name']} lacks {missing}"
    template = find(objects(case), "Deployment", RELEASE)["spec"]["template"]["metadata"]["labels"]
    assert set(template) >= REQUIRED_LABELS


@pytest.mark.parametrize("case", CASES)
def test_pod_is_locked_down(case: str) -> None:
    objs = objects(case)
    pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (
        isinstance(pod["securityContext"]["runAsUser"], int)
        and pod["securityContext"]["runAsUser"] > 0
    )
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for name, c in containers(objs).items():
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True, name
        assert sc["allowPrivilegeEscalation"] is False, name
        assert sc["capabilities"]["drop"] == ["ALL"], name
        assert sc["runAsNonRoot"] is True and isinstance(sc["runAsUser"], int), name
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], name
        assert {"livenessProbe", "readinessProbe"} <= set(c), name


def test_containers_and_probes() -> None:
    objs = objects("default")
    c = containers(objs)
    assert list(c) == ["kube-scheduler", "extender"]
    sched = c["kube-scheduler"]
    # No tag set: the cluster's own version (helm's default capabilities when rendered
    # offline), so the scheduler never runs newer than its API server.
    assert sched["image"] == f"registry.k8s.io/kube-scheduler:{render_default_kube_version()}"
    assert "--config=/etc/kubernetes/decice/scheduler-config.yaml" in sched["command"]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        get = sched[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == ("/healthz", 10259, "HTTPS")
    ext = c["extender"]
    assert ext["args"] == ["--config", "/etc/decice/extender.yaml", "--log-level", "info"]
    logs = {"extender": {"logLevel": "debug", "logFormat": "json"}}
    assert containers(render_objects(logs))["extender"]["args"][2:] == [
        "--log-level", "debug", "--log-format", "json"
    ]  # fmt: skip
    assert {"name": "policy", "mountPath": "/etc/decice", "readOnly": True} in ext["volumeMounts"]
    # Probes on the metrics listener (pod IP); the verbs have no containerPort at all.
    assert ext["ports"] == [{"name": "metrics", "containerPort": 8889, "protocol": "TCP"}]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert ext[probe]["httpGet"] == {"path": path, "port": "metrics"}
    assert "env" not in ext  # PROMETHEUS_URL only when extender.prometheusUrl is set


def render_default_kube_version() -> str:
    """The KubeVersion helm renders with offline, read from a probe template's output."""
    doc = rendered("default")["decice-extender/templates/deployment.yaml"]
    tag = doc.split("registry.k8s.io/kube-scheduler:", 1)[1].split('"', 1)[0]
    assert re.fullmatch(r"v1\.[0-9]+\.[0-9]+", tag), tag
    return tag


@pytest.mark.parametrize(
    ("cluster", "tag"),
    [
        ("v1.31.4", "v1.31.4"),
        ("v1.31.4-eks-2d5f260", "v1.31.4"),
        ("v1.30.2+k3s1", "v1.30.2"),
    ],
)
def test_scheduler_tag_follows_the_cluster_version(cluster: str, tag: str) -> None:
    helper = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    block = helper.split('define "decice-extender.schedulerTag"', 1)[1]
    pattern = re.search(r'regexFind "([^"]+)"', block)
    assert pattern is not None
    found = re.match(pattern.group(1).replace("\\\\", "\\"), cluster)
    assert found is not None and "v" + found.group(0).removeprefix("v") == tag


def test_a_pinned_scheduler_tag_wins() -> None:
    objs = render_objects({"scheduler": {"image": {"tag": "v1.30.1"}}})
    assert containers(objs)["kube-scheduler"]["image"].endswith(":v1.30.1")


def render_objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)
    return [yaml.safe_load(doc) for doc in render_mod.documents(out)]


def test_the_verbs_stay_on_loopback_and_metrics_get_their_own_listener(tmp_path: Path) -> None:
    for case in CASES:
        settings = load_policy(objects(case), tmp_path)
        assert settings.server.host == "127.0.0.1", case
        assert (settings.server.metrics_host, settings.server.metrics_port) == ("0.0.0.0", 8889)


def test_prometheus_credentials_come_from_secrets(tmp_path: Path) -> None:
    objs = render_objects(
        {
            "extender": {
                "prometheusAuth": {
                    "bearerToken": {"secretName": "prom-token"},
                    "ca": {"secretName": "prom-ca", "key": "bundle.pem"},
                },
                "extraEnvFrom": [{"secretRef": {"name": "more-env"}}],
                "extraVolumes": [{"name": "x", "emptyDir": {}}],
                "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}],
            }
        }
    )
    ext = containers(objs)["extender"]
    pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["prometheus-bearertoken"]["secret"]["secretName"] == "prom-token"
    assert volumes["prometheus-ca"]["secret"] == {
        "secretName": "prom-ca",
        "items": [{"key": "bundle.pem", "path": "bundle.pem"}],
    }
    mounts = {m["name"]: m for m in ext["volumeMounts"]}
    assert mounts["prometheus-ca"] == {
        "name": "prometheus-ca",
        "mountPath": "/etc/decice-secrets/ca",
        "readOnly": True,
    }
    assert "x" in volumes and mounts["x"]["mountPath"] == "/x"
    assert ext["envFrom"] == [{"secretRef": {"name": "more-env"}}]
    policy = yaml.safe_load(policy_text(objs))["prometheus"]
    assert policy["bearerTokenFile"] == "/etc/decice-secrets/bearertoken/token"
    assert policy["caFile"] == "/etc/decice-secrets/ca/bundle.pem"
    assert "secret" not in policy_text(objs).lower().replace("decice-secrets", "")


def test_a_tenant_header_comes_from_a_secret_in_both_deployments(tmp_path: Path) -> None:
    tenant = {"secretName": "mimir-tenant", "key": "org"}
    objs = render_objects(
        {
            "extender": {"prometheusAuth": {"headers": {"X-Scope-OrgID": tenant}}},
            "rebalancer": {"enabled": True},
            "policy": {"prometheus": {"partialResponse": False, "dedup": True}},
        }
    )
    deployments = [d for d in objs if d["kind"] == "Deployment"]
    assert len(deployments) == 2  # the extender and the rebalancer both query
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["prometheus-header-x-scope-orgid"]["secret"] == {
            "secretName": "mimir-tenant",
            "items": [{"key": "org", "path": "org"}],
        }
        mounts = {m["name"]: m for c in pod["containers"] for m in c.get("volumeMounts", [])}
        assert mounts["prometheus-header-x-scope-orgid"]["mountPath"] == (
            "/etc/decice-secrets/header-x-scope-orgid"
        )
    settings = load_policy(objs, tmp_path)
    assert dict(settings.prometheus.header_files) == {
        "X-Scope-OrgID": "/etc/decice-secrets/header-x-scope-orgid/org"
    }
    assert settings.prometheus.query_parameters == {"dedup": "true", "partial_response": "false"}
    assert "mimir-tenant" not in policy_text(objs)


@pytest.mark.parametrize("header", ["Authorization", "cookie", "Proxy-Authorization"])
def test_a_credential_header_in_the_policy_configmap_is_refused(header: str) -> None:
    values = {"policy": {"prometheus": {"headers": {header: "secret"}}}}
    with pytest.raises(helm.HelmRenderError, match="plain ConfigMap"):
        render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)


def test_an_authorization_header_in_the_policy_configmap_is_refused() -> None:
    values = {"policy": {"prometheus": {"headers": {"authorization": "Bearer abc"}}}}
    with pytest.raises(helm.HelmRenderError, match="plain ConfigMap"):
        render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)


def test_service_monitor_scrapes_the_metrics_listener_behind_a_network_policy() -> None:
    objs = objects("monitoring-values")
    ext = containers(objs)["extender"]
    assert ext["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {
        "name": "PROMETHEUS_URL",
        "value": "http://kube-prometheus-stack-prometheus.monitoring.svc:9090",
    } in ext["env"]
    service = find(objs, "Service", f"{RELEASE}-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    scheduler = find(objs, "Service", f"{RELEASE}-scheduler-metrics")
    assert scheduler["spec"]["ports"] == [
        {"name": "https-metrics", "port": 10259, "targetPort": "https-sched", "protocol": "TCP"}
    ]
    monitor = find(objs, "ServiceMonitor", RELEASE)
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http-metrics", "https-metrics"]
    # Prometheus may GET kube-scheduler's /metrics: the ClusterRole its account needs
    reader = find(objs, "ClusterRole", f"{RELEASE}-scheduler-metrics")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = find(objs, "ClusterRoleBinding", f"{RELEASE}-scheduler-metrics")
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "kube-prometheus-stack-prometheus",
            "namespace": "monitoring",
        }
    ]
    policy = find(objs, "NetworkPolicy", RELEASE)["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert [r["ports"] for r in policy["ingress"]] == [
        [{"port": 8889, "protocol": "TCP"}],
        [{"port": 10259, "protocol": "TCP"}],  # kube-scheduler's /metrics
    ]
    for rule in policy["ingress"]:
        assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "monitoring"
        }


def test_ha_values_give_two_replicas_and_a_pdb() -> None:
    """ci/ha-values.yaml sets replicas: 2 and leaves the rest to the chart: a PDB, a rolling
    update that keeps both replicas, the replicas preferably on distinct nodes."""
    objs = objects("ha-values")
    deployment = find(objs, "Deployment", RELEASE)["spec"]
    assert deployment["replicas"] == 2
    assert deployment["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    [term] = deployment["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["selector"]["matchLabels"]
    )
    assert "podDisruptionBudget" not in values_for("ha-values")  # the chart's own choice
    pdb = find(objs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert (
        pdb["spec"]["selector"]["matchLabels"]
        == find(objs, "Deployment", RELEASE)["spec"]["selector"]["matchLabels"]
    )
    assert scheduler_config(objs)["leaderElection"]["leaderElect"] is True


@pytest.mark.parametrize("release", [RELEASE, "blue"])
def test_a_spread_constraint_without_a_selector_selects_its_own_release(release: str) -> None:
    values = {**values_for("ha-values"), "rebalancer": {"enabled": True}}
    values["rebalancer"]["topologySpreadConstraints"] = values["topologySpreadConstraints"]
    docs = render_mod.render_chart(values, name=release, namespace=NAMESPACE)
    objs = [yaml.safe_load(doc) for doc in render_mod.documents(docs)]
    for deployment in (o for o in objs if o["kind"] == "Deployment"):
        template = deployment["spec"]["template"]
        [spread] = template["spec"]["topologySpreadConstraints"]
        selector = spread["labelSelector"]["matchLabels"]
        # The selector is the Deployment's own, so the constraint counts exactly its pods.
        assert selector == deployment["spec"]["selector"]["matchLabels"]
        assert selector["app.kubernetes.io/instance"] == release
        assert all(template["metadata"]["labels"][k] == v for k, v in selector.items())
        assert spread["topologyKey"] == "kubernetes.io/hostname"
    # A constraint that names its own selector keeps it.
    mine = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"team": "x"}}}  # fmt: skip
    docs = render_mod.render_chart({"topologySpreadConstraints": [mine]}, name=release)
    [deployment] = [  # the extender's (the rebalancer keeps its own, none here)
        o
        for o in map(yaml.safe_load, render_mod.documents(docs))
        if o["kind"] == "Deployment" and not o["metadata"]["name"].endswith("-rebalancer")
    ]
    assert deployment["spec"]["template"]["spec"]["topologySpreadConstraints"] == [mine]


# --- RBAC ---------------------------------------------------------------------------


def test_rbac() -> None:
    objs = objects("default")
    sa = {"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}
    bound = {
        (b["kind"], b["metadata"].get("namespace"), b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in objs
        if b["kind"] in {"ClusterRoleBinding", "RoleBinding"} and b["subjects"] == [sa]
    }
    assert bound == {
        ("ClusterRoleBinding", None, "ClusterRole", "system:kube-scheduler"),
        ("ClusterRoleBinding", None, "ClusterRole", "system:volume-scheduler"),
        ("ClusterRoleBinding", None, "ClusterRole", f"{RELEASE}-extender"),
        ("RoleBinding", "kube-system", "Role", "extension-apiserver-authentication-reader"),
        ("RoleBinding", NAMESPACE, "Role", f"{RELEASE}-leader-election"),
    }
    # The extender: exactly what it needs, nothing more.
    extender = find(objs, "ClusterRole", f"{RELEASE}-extender")
    granted = {
        (res, verb)
        for rule in extender["rules"]
        for res in rule["resources"]
        for verb in rule["verbs"]
        if rule["apiGroups"] == [""] and "resourceNames" not in rule
    }
    assert granted == {
        ("nodes", "get"), ("nodes", "list"), ("nodes", "watch"),
        ("pods", "get"), ("pods", "list"), ("pods", "watch"), ("pods", "patch"),
        ("pods/binding", "create"),
    }  # fmt: skip
    others = [rule for rule in extender["rules"] if rule["apiGroups"] != [""]]
    assert others == [
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}
    ]  # the Event on each placed pod (explain.events)
    # The lease: only its own name, plus create (which cannot be narrowed by name).
    role = find(objs, "Role", f"{RELEASE}-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [LEASE],
            "verbs": ["get", "update"],
        },
    ]
    pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RELEASE


@pytest.mark.parametrize(
    ("policy", "pod_verbs"),
    [
        ({"requeue": {"enabled": False}}, ["get", "list", "watch"]),
        ({"kubernetes": {"watchPods": False}}, ["get"]),
    ],
)
def test_pod_rbac_follows_the_policy(policy: dict[str, Any], pod_verbs: list[str]) -> None:
    docs = render_mod.render_chart({"policy": policy}, name=RELEASE, namespace=NAMESPACE)
    objs = [yaml.safe_load(doc) for doc in render_mod.documents(docs)]
    extender = find(objs, "ClusterRole", f"{RELEASE}-extender")
    pods = [rule["verbs"] for rule in extender["rules"] if rule["resources"] == ["pods"]]
    assert pods == [pod_verbs]


# --- the scheduler config -------------------------------------------------------------


@pytest.mark.parametrize("case", EXTENDER_CASES)
def test_scheduler_config(case: str) -> None:
    objs = objects(case)
    cfg = scheduler_config(objs)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    assert set(cfg) <= SCHEDULER_CONFIG_KEYS, set(cfg) - SCHEDULER_CONFIG_KEYS
    assert set(cfg["leaderElection"]) <= LEADER_ELECTION_KEYS
    assert cfg["leaderElection"]["resourceName"] == LEASE
    assert cfg["leaderElection"]["resourceNamespace"] == NAMESPACE
    assert cfg["leaderElection"]["resourceLock"] == "leases"
    assert cfg["percentageOfNodesToScore"] == 100
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["decice_sched"]
    assert all(set(p) <= PROFILE_KEYS for p in cfg["profiles"])
    [ext] = cfg["extenders"]
    assert set(ext) <= EXTENDER_KEYS, set(ext) - EXTENDER_KEYS
    assert ext["nodeCacheCapable"] is True
    assert ext["enableHTTPS"] is False
    assert isinstance(ext["weight"], int) and ext["weight"] >= 1
    assert isinstance(ext["ignorable"], bool)
    assert re.fullmatch(r"\d+(ms|s|m)", ext["httpTimeout"])
    url = urlsplit(ext["urlPrefix"])
    assert (url.scheme, url.hostname) == ("http", "127.0.0.1")
    # The lease kube-scheduler takes is the one the Role lets it use.
    role = find(objs, "Role", f"{RELEASE}-leader-election")
    assert role["rules"][1]["resourceNames"] == [cfg["leaderElection"]["resourceName"]]


@pytest.mark.parametrize("case", EXTENDER_CASES)
def test_policy_loads_with_the_extender_loader(case: str, tmp_path: Path) -> None:
    objs = objects(case)
    settings = load_policy(objs, tmp_path)
    ext = scheduler_config(objs)["extenders"][0]
    url = urlsplit(ext["urlPrefix"])
    assert settings.server.port == url.port
    assert settings.server.metrics_port == containers(objs)["extender"]["ports"][0]["containerPort"]
    assert settings.server.host == url.hostname == "127.0.0.1"
    assert settings.server.url_prefix == url.path.rstrip("/")
    assert settings.scheduler_names == frozenset({"decice_sched"})
    assert ("bindVerb" in ext) == settings.bind.enabled


@pytest.mark.parametrize("case", EXTENDER_CASES)
def test_scheduler_calls_the_paths_the_extender_serves(case: str, tmp_path: Path) -> None:
    objs = objects(case)
    served = verb_paths(load_policy(objs, tmp_path))
    ext = scheduler_config(objs)["extenders"][0]
    base = urlsplit(ext["urlPrefix"]).path.rstrip("/")
    called = [verb for verb, key in VERB_KEYS.items() if key in ext]
    assert "prioritize" in called
    for verb in called:
        # kube-scheduler POSTs <urlPrefix without trailing slash>/<verb>
        assert verb in served, (
            f"the scheduler calls {VERB_KEYS[verb]} but the extender serves no {verb}"
        )
        assert f"{base}/{ext[VERB_KEYS[verb]]}" == served[verb], (verb, served)


EDGE_POLICIES = [
    pytest.param({"name": "cpu", "query": "up", "filter": {"above": 0}}, id="threshold-zero"),
    pytest.param({"name": "cpu", "query": "up", "filter": {"below": 0.1}}, id="below"),
    pytest.param({"name": "cpu", "query": "up", "filter": None}, id="no-filter"),
    pytest.param({"name": "cpu", "query": "up", "filter": {"above": None}}, id="null-threshold"),
    pytest.param({"name": "cpu", "query": "up", "onMissing": "fail-closed"}, id="fail-closed"),
]


@pytest.mark.parametrize("case", [*EXTENDER_CASES, *EDGE_POLICIES])
def test_extender_entry_agrees_with_decice_extender_scheduler_config(
    case: str | dict[str, Any], tmp_path: Path
) -> None:
    """The chart and `decice-extender scheduler-config` derive the same entry from a policy."""
    if isinstance(case, dict):
        values = {"policy": {"metrics": [case]}}
        objs = [yaml.safe_load(d) for d in render_mod.documents(render_mod.render_chart(values))]
    else:
        objs = objects(case)
    ext = scheduler_config(objs)["extenders"][0]
    cli = scheduler_extender(load_policy(objs, tmp_path), ext["weight"], ext["httpTimeout"], None)
    assert ext == {**cli, "ignorable": ext["ignorable"]}


def test_checksums_roll_the_pod_when_a_config_changes() -> None:
    def annotations(values: dict[str, Any]) -> dict[str, str]:
        objs = [yaml.safe_load(d) for d in render_mod.documents(render_mod.render_chart(values))]
        ann: dict[str, str] = find(objs, "Deployment", RELEASE)["spec"]["template"]["metadata"][
            "annotations"
        ]
        return ann

    base = annotations({})
    policy = annotations({"policy": {"prometheus": {"interval": 30}}})
    sched = annotations({"scheduler": {"extender": {"weight": 3}}})
    assert policy["checksum/policy"] != base["checksum/policy"]
    assert policy["checksum/scheduler-config"] == base["checksum/scheduler-config"]
    assert sched["checksum/scheduler-config"] != base["checksum/scheduler-config"]


def test_verbs_follow_the_policy() -> None:
    default = scheduler_config(objects("default"))["extenders"][0]
    assert {k: v for k, v in default.items() if k.endswith("Verb")} == {
        "filterVerb": "filter",
        "preemptVerb": "preempt",
        "prioritizeVerb": "prioritize",
        "bindVerb": "bind",
    }
    # static-values: no threshold, bind disabled -> only prioritize is called.
    static = scheduler_config(objects("static-values"))["extenders"][0]
    assert [k for k in static if k.endswith("Verb")] == ["prioritizeVerb"]


def test_notes_tell_how_to_use_it() -> None:
    notes = rendered("default")[f"{RELEASE}/templates/NOTES.txt"]
    assert "schedulerName: decice_sched" in notes
    assert f"kubectl -n {NAMESPACE} port-forward deploy/{RELEASE} 8888:8888" in notes
    assert "curl" in notes and "http://127.0.0.1:8888/prioritize" in notes
    body = re.search(r"-d '(.+)'", notes)
    assert body is not None and set(json.loads(body.group(1))) == {"Pod", "Nodes", "NodeNames"}
    assert "ImagePullBackOff" in notes and "decice-extender:0.1.0" in notes
    assert "Note: /metrics" not in notes
    assert "Note: /metrics" not in rendered("monitoring-values")[f"{RELEASE}/templates/NOTES.txt"]
    exposed = render_mod.render_chart({"metrics": {"service": {"enabled": True}}})
    assert "(the verbs are not)" in exposed[f"{RELEASE}/templates/NOTES.txt"]


# --- the policy schema stays in step with docs/configuration.md -------------------------


def _key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{prefix}{key}"
            if prefix.startswith("static.nodes") or f"{prefix}{key}" in {
                "static.nodes",
                "prometheus.headers",
            }:
                continue
            yield from _key_paths(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for item in node:
            yield from _key_paths(item, f"{prefix.rstrip('.')}[].")


def _schema_has(path: str) -> bool:
    node: dict[str, Any] = schema()["properties"]["policy"]
    for part in path.split("."):
        if part.endswith("[]"):
            node = node["properties"][part[:-2]]["items"]
        else:
            props = node.get("properties", {})
            if part not in props:
                return False
            node = props[part]
    return True


CHART_OWNED = {
    "schedulerNames",
    "server.host",
    "server.port",
    "server.tls",
    "server.metricsPort",
    "server.metricsHost",
}


def test_policy_schema_knows_every_documented_key() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert block is not None
    example = yaml.safe_load(block.group(1).replace("<PromQL>", "up"))
    paths = [
        p
        for p in _key_paths(example)
        if not any(p == o or p.startswith(o + ".") for o in CHART_OWNED)
    ]
    missing = [p for p in paths if not _schema_has(p)]
    assert missing == [], "values.schema.json (policy) lacks documented keys"
    # The documented example itself, minus the chart-owned keys, is a valid values.policy.
    trimmed = copy.deepcopy(example)
    del trimmed["schedulerNames"]
    for key in ("host", "port", "tls", "metricsPort", "metricsHost"):
        del trimmed["server"][key]
    errors = jsonschema.Draft7Validator(schema()["properties"]["policy"]).iter_errors(trimmed)
    assert [e.message for e in errors] == []


# --- plain manifests and config/ examples ------------------------------------------------


def test_plain_manifests_are_in_sync(capsys: pytest.CaptureFixture[str]) -> None:
    assert render_mod.main(["--check"]) == 0, capsys.readouterr().out


def test_render_check_reports_a_stale_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "stale.yaml"
    stale.write_text(
        render_mod.MANIFEST.read_text(encoding="utf-8").replace("replicas: 1", "replicas: 3")
    )
    assert render_mod.main(["--check", "--output", str(stale)]) == 1
    out = capsys.readouterr().out
    assert "-  replicas: 3" in out and "+  replicas: 1" in out


def test_plain_manifests_validate() -> None:
    docs = [d for d in yaml.safe_load_all(render_mod.MANIFEST.read_text(encoding="utf-8")) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    for obj in docs:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        assert obj["kind"] == "Namespace" or obj["metadata"].get("namespace", NAMESPACE) in {
            NAMESPACE,
            "kube-system",
        }


def test_second_scheduler_example_matches_the_chart() -> None:
    example = yaml.safe_load(
        (ROOT / "config" / "scheduler-config-second-scheduler.yaml").read_text()
    )
    assert example == scheduler_config(objects("default"))


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("policy-kube-prometheus-stack.yaml", "node"),
        ("policy-node-exporter-nodename.yaml", "nodename"),
    ],
)
def test_policy_examples_load(name: str, label: str) -> None:
    settings = load_settings(ROOT / "config" / name, environ={})
    assert settings.prometheus.node_label == label
    assert settings.server.host == "127.0.0.1" and settings.server.port == 8888
    [metric] = settings.default.metrics
    assert f"by ({label})" in re.sub(r"\s+", " ", metric.query)


def test_nginx_pod_example() -> None:
    pod = yaml.safe_load((ROOT / "config" / "nginx-pod.yaml").read_text())
    kubernetes_validate.validate(pod, KUBE_VERSION, strict=True)
    assert pod["spec"]["schedulerName"] == "decice_sched"
    assert all(c["resources"]["requests"]["cpu"] for c in pod["spec"]["containers"])


# --- leader election: the lease and its RBAC ---------------------------------------------


def _lease_objects(values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    docs = render_mod.render_chart(values, name=RELEASE, namespace=namespace)
    return [yaml.safe_load(doc) for doc in render_mod.documents(docs)]


def test_the_lease_lives_in_the_release_namespace_under_its_configured_name() -> None:
    """Never kube-system: there system:kube-scheduler may only use the lease kube-scheduler."""
    values = {"scheduler": {"leaderElection": {"resourceName": "team-a-scheduler"}}}
    objs = _lease_objects(values, "team-a")
    le = scheduler_config(objs)["leaderElection"]
    assert le["leaderElect"] is True
    assert le["resourceLock"] == "leases"
    assert (le["resourceNamespace"], le["resourceName"]) == ("team-a", "team-a-scheduler")
    role = find(objs, "Role", f"{RELEASE}-leader-election")
    assert role["metadata"]["namespace"] == "team-a"
    assert role["rules"][1]["resourceNames"] == ["team-a-scheduler"]
    binding = find(objs, "RoleBinding", f"{RELEASE}-leader-election")
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": RELEASE, "namespace": "team-a"}
    ]
    assert find(objs, "Deployment", RELEASE)["metadata"]["namespace"] == "team-a"


def test_the_lease_role_grants_exactly_what_client_go_leader_election_uses() -> None:
    """get/update on the lease by name, create unnarrowed (create has no name to check);
    no list/watch/patch/delete, no other resource. Events come from system:kube-scheduler."""
    objs = objects("default")
    role = find(objs, "Role", f"{RELEASE}-leader-election")
    granted = {
        (group, res, verb, tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", (LEASE,)),
        ("coordination.k8s.io", "leases", "update", (LEASE,)),
    }
    binding = find(objs, "RoleBinding", f"{RELEASE}-leader-election")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"{RELEASE}-leader-election",
    }


def test_the_lease_role_is_what_decice_extender_scheduler_config_rbac_prints() -> None:
    from extender.policy.scheduler_config import rbac_documents, service_account

    objs = objects("default")
    cli_role, cli_binding = rbac_documents(LEASE, NAMESPACE, service_account(RELEASE))
    assert find(objs, "Role", f"{RELEASE}-leader-election")["rules"] == cli_role["rules"]
    binding = find(objs, "RoleBinding", f"{RELEASE}-leader-election")
    assert binding["subjects"] == cli_binding["subjects"]


def test_no_lease_role_without_leader_election() -> None:
    objs = _lease_objects({"scheduler": {"leaderElection": {"enabled": False}}}, NAMESPACE)
    assert scheduler_config(objs)["leaderElection"]["leaderElect"] is False
    assert not [o for o in objs if o["metadata"]["name"] == f"{RELEASE}-leader-election"]
    assert find(objs, "ClusterRoleBinding", f"{RELEASE}-kube-scheduler")


def test_a_lease_name_longer_than_a_dns_subdomain_is_refused() -> None:
    values = {"scheduler": {"leaderElection": {"resourceName": "a" * 254}}}
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError, match="resourceName"):
            chart.render(values, name=RELEASE, namespace=NAMESPACE)
        merged = chart.merge_values(values)
    assert any("resourceName" in e for e in schema_errors(merged))


def test_tls_for_the_verbs_from_a_secret_or_cert_manager(tmp_path: Path) -> None:
    tls = {"clientAuth": True, "certManager": {"enabled": True, "issuerRef": {"name": "ca"}}}
    objs = render_objects({"extender": {"tls": tls, "listenAddress": "0.0.0.0"}})
    cert = find(objs, "Certificate")
    assert cert["spec"]["secretName"] == f"{RELEASE}-tls"
    assert cert["spec"]["ipAddresses"] == ["127.0.0.1"]
    assert set(cert["spec"]["usages"]) == {"server auth", "client auth"}
    entry = scheduler_config(objs)["extenders"][0]
    assert entry["urlPrefix"] == "https://127.0.0.1:8888" and entry["enableHTTPS"] is True
    assert entry["tlsConfig"] == {
        "caFile": "/etc/decice-tls/ca.crt",
        "certFile": "/etc/decice-tls/tls.crt",
        "keyFile": "/etc/decice-tls/tls.key",
    }
    mount = {"name": "tls", "mountPath": "/etc/decice-tls", "readOnly": True}
    for name, container in containers(objs).items():
        assert mount in container["volumeMounts"], name
    pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": f"{RELEASE}-tls"}} in pod["volumes"]
    # Mutual TLS is what lets the extender accept a verbs address beyond loopback.
    settings = load_policy(objs, tmp_path)
    assert settings.server.tls.client_ca_file == "/etc/decice-tls/ca.crt"
    assert settings.server.host == "0.0.0.0" and settings.bind.enabled


def test_without_mutual_tls_the_extender_refuses_an_exposed_verbs_address(
    tmp_path: Path,
) -> None:
    objs = render_objects({"extender": {"tls": {"secretName": "t"}, "listenAddress": "0.0.0.0"}})
    assert scheduler_config(objs)["extenders"][0]["tlsConfig"] == {
        "caFile": "/etc/decice-tls/ca.crt"
    }
    with pytest.raises(ConfigError, match="would let anyone who reaches this pod bind pods"):
        load_policy(objs, tmp_path)
    assert not any(o["kind"] == "Certificate" for o in objs)
    with pytest.raises(helm.HelmRenderError, match=r"issuerRef\.name"):
        render_mod.render_chart({"extender": {"tls": {"certManager": {"enabled": True}}}})


def test_the_image_defaults_to_what_the_release_workflow_pushes() -> None:
    """The default image is the release workflow's (tests/deploy/test_release.py checks the
    two agree); an empty repository is refused, by the schema and by the template."""
    deployment = find(objects("default"), "Deployment", RELEASE)
    [extender] = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "extender"
    ]
    assert extender["image"] == "ghcr.io/decice/decice-extender:0.1.0"
    with pytest.raises(helm.HelmValuesError, match=r"/extender/image/repository"):
        render_mod.render_chart({"extender": {"image": {"repository": ""}}})
    assert any(
        "repository" in e for e in schema_errors({"extender": {"image": {"repository": ""}}})
    )
    helper = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    assert 'required "extender.image.repository is empty' in helper  # without the schema too
    built = render_mod.render_chart(
        {"extender": {"image": {"repository": "registry.example/decice"}}}
    )
    deployment = next(text for path, text in built.items() if path.endswith("/deployment.yaml"))
    assert 'image: "registry.example/decice:0.1.0"' in deployment
