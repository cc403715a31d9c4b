"""The chart's rebalancer (`rebalancer.enabled`): on by default with mode: extender, in
evict mode (the chart's policy.rebalance.mode, as config/extender.yaml), off with
`enabled: false` and with mode: shadow; when on, a Deployment of `decice-extender
rebalance` with its own ServiceAccount and RBAC limited to what it calls (pods
get/list/watch, pods/eviction create, poddisruptionbudgets list/watch, nodes list/watch,
events create, its Lease).
Rendered offline with helm-python-sdk, validated with kubernetes-validate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml

from extender.policy.loading import load_settings
from tests.deploy.chart import KUBE_VERSION, grants, render_mod, schema_problems

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "decice-extender"
RELEASE = "decice-extender"
NAMESPACE = "decice-system"
NAME = f"{RELEASE}-rebalancer"
LEASE_ROLE = f"{NAME}-leader-election"
POLICY_PATH = "/etc/decice/extender.yaml"
ON: dict[str, Any] = {"rebalancer": {"enabled": True}}
OFF: dict[str, Any] = {"rebalancer": {"enabled": False}}
OBJECTS = {
    ("Deployment", NAME),
    ("ServiceAccount", NAME),
    ("ClusterRole", NAME),
    ("ClusterRoleBinding", NAME),
    ("Role", LEASE_ROLE),
    ("RoleBinding", LEASE_ROLE),
}
"""What the rebalancer adds to a release."""

# Everything the rebalancer may do, cluster-wide: (apiGroup, resource, verb).
CLUSTER_GRANTS = {
    ("", "pods", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/eviction", "create"),
    ("policy", "poddisruptionbudgets", "list"),
    ("policy", "poddisruptionbudgets", "watch"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("events.k8s.io", "events", "create"),
}


def render(values: dict[str, Any], namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    docs = render_mod.render_chart(values, name=RELEASE, namespace=namespace)
    return [yaml.safe_load(doc) for doc in render_mod.documents(docs)]


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one {kind} {name}, found {len(hits)}"
    return hits[0]


def pod_spec(objs: list[dict[str, Any]], name: str = NAME) -> dict[str, Any]:
    spec: dict[str, Any] = find(objs, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    [only] = pod_spec(objs)["containers"]
    assert isinstance(only, dict)
    return only


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def schema_errors(values: dict[str, Any]) -> list[str]:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    with helm.Chart.load(CHART) as chart:
        merged = chart.merge_values(values)
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(merged)
    ]


# --- on by default, in evict mode -----------------------------------------------------------


def test_on_by_default_in_evict_mode() -> None:
    default = render({})
    assert {(o["kind"], o["metadata"]["name"]) for o in default} >= OBJECTS
    assert default == render(ON)  # unset (null) is on with mode: extender
    policy = yaml.safe_load(
        find(default, "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"]
    )
    assert policy["rebalance"] == {"mode": "evict"}
    # The chart's policy and config/extender.yaml ship the same rebalancer.
    shipped = yaml.safe_load((ROOT / "config" / "extender.yaml").read_text(encoding="utf-8"))
    assert policy["rebalance"] == shipped["rebalance"]
    # The plain manifests (the defaults) hold it too.
    manifest = render_mod.MANIFEST.read_text(encoding="utf-8")
    assert f"name: {NAME}\n" in manifest and "mode: evict" in manifest
    assert render_mod.main(["--check"]) == 0


def test_enabled_false_renders_none_of_it() -> None:
    objs = render(OFF)
    assert [o["metadata"]["name"] for o in objs if "rebalancer" in o["metadata"]["name"]] == []
    assert not [
        o
        for o in objs
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "rebalancer"
    ]
    on = {(o["kind"], o["metadata"]["name"]) for o in render({})}
    assert on - {(o["kind"], o["metadata"]["name"]) for o in objs} == OBJECTS


def test_dry_run_is_a_policy_value_away() -> None:
    values = {"policy": {"rebalance": {"mode": "dry-run"}}}
    objs = render(values)
    data = find(objs, "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"]
    assert yaml.safe_load(data)["rebalance"]["mode"] == "dry-run"
    assert {(o["kind"], o["metadata"]["name"]) for o in objs} >= OBJECTS


# --- the Deployment ---------------------------------------------------------------------


def test_deployment_runs_decice_extender_rebalance() -> None:
    objs = render(ON)
    deployment = find(objs, "Deployment", NAME)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    c = container(objs)
    assert c["name"] == "rebalancer"
    assert (
        c["image"]
        == find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]["containers"][1]["image"]
    )
    assert c["args"] == [
        "rebalance", "--config", POLICY_PATH, "--host", "0.0.0.0", "--port", "8889",
        "--log-level", "info",
    ]  # fmt: skip
    assert "command" not in c  # the image's entrypoint is decice-extender
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert "PROMETHEUS_URL" not in env
    assert c["ports"] == [{"name": "metrics", "containerPort": 8889, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    pod = pod_spec(objs)
    assert pod["serviceAccountName"] == NAME
    assert pod["terminationGracePeriodSeconds"] == 30
    # The same policy ConfigMap as the extender, read-only, at the path of --config.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["policy"] == {"name": "policy", "mountPath": "/etc/decice", "readOnly": True}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["policy"] == {"name": "policy", "configMap": {"name": f"{RELEASE}-policy"}}
    assert set(mounts) == set(volumes) == {"policy", "tmp"}
    annotations = find(objs, "Deployment", NAME)["spec"]["template"]["metadata"]["annotations"]
    extender_annotations = find(objs, "Deployment", RELEASE)["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert annotations["checksum/policy"] == extender_annotations["checksum/policy"]


def test_the_cli_accepts_the_rendered_args_and_the_policy_loads(tmp_path: Path) -> None:
    from extender.cli.main import parser

    values = {**ON, "policy": {"rebalance": {"mode": "evict", "margin": 4}}}
    objs = render(values)
    args = parser().parse_args(container(objs)["args"])
    assert (args.command, args.config, args.host, args.port) == (
        "rebalance",
        POLICY_PATH,
        "0.0.0.0",
        8889,
    )
    policy = tmp_path / "extender.yaml"
    policy.write_text(
        find(objs, "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"], encoding="utf-8"
    )
    settings = load_settings(policy, environ={})
    assert settings.rebalance.mode == "evict" and settings.rebalance.margin == 4
    assert settings.rebalance.lease_name == "decice-rebalancer"


def test_pod_is_locked_down_like_the_extender() -> None:
    objs = render(ON)
    extender = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    pod = pod_spec(objs)
    assert pod["securityContext"] == extender["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objs)["securityContext"]
    assert sc == extender["containers"][1]["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0
    resources = container(objs)["resources"]
    assert resources["requests"] and resources["limits"]["memory"]


def test_prometheus_settings_and_extras_are_the_extenders() -> None:
    values = {
        **ON,
        "extender": {
            "prometheusUrl": "http://prom.monitoring.svc:9090",
            "prometheusAuth": {
                "bearerToken": {"secretName": "prom-token"},
                "ca": {"secretName": "prom-ca", "key": "bundle.pem"},
            },
            "extraEnv": [{"name": "EXTRA", "value": "1"}],
            "extraEnvFrom": [{"secretRef": {"name": "decice-env"}}],
            "extraVolumes": [{"name": "client-cert", "secret": {"secretName": "client"}}],
            "extraVolumeMounts": [{"name": "client-cert", "mountPath": "/etc/client"}],
        },
        "rebalancer": {"enabled": True, "logFormat": "json", "metricsPort": 9100},
    }
    objs = render(values)
    c = container(objs)
    extender = find(objs, "Deployment", RELEASE)["spec"]["template"]["spec"]
    ext = extender["containers"][1]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["PROMETHEUS_URL"] == "http://prom.monitoring.svc:9090"
    assert env["EXTRA"] == "1"
    assert c["envFrom"] == ext["envFrom"] == [{"secretRef": {"name": "decice-env"}}]
    # Every mount of the extender but the verbs' TLS, at the same paths (the policy names
    # the files by path).
    assert c["volumeMounts"] == ext["volumeMounts"]
    volumes = [v for v in extender["volumes"] if v["name"] != "scheduler-config"]
    assert pod_spec(objs)["volumes"] == volumes
    assert {m["mountPath"] for m in c["volumeMounts"]} >= {
        "/etc/decice-secrets/bearertoken",
        "/etc/decice-secrets/ca",
        "/etc/client",
    }
    assert c["args"][-2:] == ["--log-format", "json"]
    assert c["args"][c["args"].index("--port") + 1] == "9100"
    assert c["ports"][0]["containerPort"] == 9100


def test_scheduling_knobs_are_its_own() -> None:
    rb = {
        "enabled": True,
        "replicas": 3,
        "priorityClassName": "low",
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {}},
        "podAnnotations": {"a": "b"},
        "podLabels": {"team": "x"},
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
        "terminationGracePeriodSeconds": 5,
    }
    objs = render({"rebalancer": rb, "nodeSelector": {"pool": "sched"}})
    deployment = find(objs, "Deployment", NAME)
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["spec"]["priorityClassName"] == "low"
    assert pod["spec"]["nodeSelector"] == {"pool": "system"}
    assert pod["spec"]["tolerations"] == rb["tolerations"]
    assert pod["spec"]["affinity"] == {"podAntiAffinity": {}}
    assert pod["spec"]["terminationGracePeriodSeconds"] == 5
    assert pod["metadata"]["annotations"]["a"] == "b"
    assert pod["metadata"]["labels"]["team"] == "x"
    assert container(objs)["resources"] == rb["resources"]
    assert pod_spec(objs, RELEASE)["nodeSelector"] == {"pool": "sched"}


# --- RBAC -------------------------------------------------------------------------------


def test_cluster_role_grants_exactly_what_it_calls() -> None:
    objs = render(ON)
    role = find(objs, "ClusterRole", NAME)
    assert all("resourceNames" not in rule for rule in role["rules"])
    assert {(g, r, v) for g, r, v, _ in grants(role)} == CLUSTER_GRANTS
    # Spelled out: nothing that binds, patches, deletes or reads secrets.
    verbs = {v for _, _, v, _ in grants(role)}
    resources = {r for _, r, _, _ in grants(role)}
    assert not verbs & {"patch", "update", "delete", "deletecollection", "*", "escalate", "bind"}
    assert not resources & {"pods/binding", "bindings", "secrets", "*"}


def test_lease_role_is_limited_to_its_lease() -> None:
    objs = render(ON)
    role = find(objs, "Role", LEASE_ROLE)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", ("decice-rebalancer",)),
        ("coordination.k8s.io", "leases", "update", ("decice-rebalancer",)),
    }


def test_lease_name_and_namespace_follow_the_policy() -> None:
    values = {
        **ON,
        "policy": {"rebalance": {"leaseName": "team-a-rebalancer", "leaseNamespace": "leases"}},
    }
    objs = render(values)
    role = find(objs, "Role", LEASE_ROLE)
    binding = find(objs, "RoleBinding", LEASE_ROLE)
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "leases"
    assert {names for *_, names in grants(role) if names} == {("team-a-rebalancer",)}
    # The subject stays the ServiceAccount of the release namespace.
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    # Everything else stays in the release namespace.
    assert find(objs, "Deployment", NAME)["metadata"]["namespace"] == NAMESPACE
    assert find(objs, "ServiceAccount", NAME)["metadata"]["namespace"] == NAMESPACE


def test_bindings_point_at_the_rebalancers_own_service_account() -> None:
    objs = render(ON, namespace="team-a")
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": "team-a"}]
    sa = find(objs, "ServiceAccount", NAME)
    assert sa["metadata"]["namespace"] == "team-a"
    crb = find(objs, "ClusterRoleBinding", NAME)
    assert crb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": NAME,
    }
    assert crb["subjects"] == subject
    rb = find(objs, "RoleBinding", LEASE_ROLE)
    assert rb["metadata"]["namespace"] == "team-a"
    assert rb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": LEASE_ROLE,
    }
    assert rb["subjects"] == subject
    # The rebalancer's ServiceAccount is bound to nothing else (no kube-scheduler role,
    # no bind), and the extender's to none of the rebalancer's roles.
    bindings = [o for o in objs if o["kind"] in {"ClusterRoleBinding", "RoleBinding"}]
    assert {b["metadata"]["name"] for b in bindings if b["subjects"] == subject} == {
        NAME,
        LEASE_ROLE,
    }
    assert all(
        b["subjects"] == subject for b in bindings if b["roleRef"]["name"] in {NAME, LEASE_ROLE}
    )


def test_the_extender_never_gets_eviction_rights() -> None:
    objs = render(ON)
    extender = find(objs, "ClusterRole", f"{RELEASE}-extender")
    resources = {r for _, r, _, _ in grants(extender)}
    assert "pods/eviction" not in resources
    assert pod_spec(objs, RELEASE)["serviceAccountName"] == RELEASE
    # And its role is the same whether the rebalancer is on or off.
    assert extender == find(render({}), "ClusterRole", f"{RELEASE}-extender")


def test_a_custom_service_account_name_and_annotations() -> None:
    rb = {"enabled": True, "serviceAccount": {"name": "mover", "annotations": {"a": "b"}}}
    objs = render({"rebalancer": rb})
    sa = find(objs, "ServiceAccount", "mover")
    assert sa["metadata"]["annotations"] == {"a": "b"}
    assert pod_spec(objs)["serviceAccountName"] == "mover"
    assert find(objs, "ClusterRoleBinding", NAME)["subjects"][0]["name"] == "mover"
    assert find(objs, "RoleBinding", LEASE_ROLE)["subjects"][0]["name"] == "mover"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"rebalancer": {"enabled": True, "serviceAccount": {"name": RELEASE}}},
            "rebalancer.serviceAccount.name must differ",
            id="shared-service-account",
        ),
        pytest.param(
            {**ON, "policy": {"rebalance": {"leaseName": "decice-scheduler"}}},
            "policy.rebalance.leaseName must differ",
            id="the-schedulers-lease",
        ),
    ],
)
def test_unsafe_combinations_are_refused(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmRenderError, match=message):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)


# --- selectors, monitoring ----------------------------------------------------------------


def test_no_extender_selector_matches_rebalancer_pods() -> None:
    values = {
        **ON,
        "replicas": 2,
        "podDisruptionBudget": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "networkPolicy": {"enabled": True},
    }
    objs = render(values)
    rebalancer_pod = find(objs, "Deployment", NAME)["spec"]["template"]["metadata"]["labels"]
    extender_pod = find(objs, "Deployment", RELEASE)["spec"]["template"]["metadata"]["labels"]
    extender_selectors = [
        find(objs, "Deployment", RELEASE)["spec"]["selector"]["matchLabels"],
        find(objs, "PodDisruptionBudget", RELEASE)["spec"]["selector"]["matchLabels"],
        find(objs, "NetworkPolicy", RELEASE)["spec"]["podSelector"]["matchLabels"],
        find(objs, "Service", f"{RELEASE}-metrics")["spec"]["selector"],
    ]
    for selector in extender_selectors:
        assert matches(selector, extender_pod) and not matches(selector, rebalancer_pod)
    rebalancer_selectors = [
        find(objs, "Deployment", NAME)["spec"]["selector"]["matchLabels"],
        find(objs, "NetworkPolicy", NAME)["spec"]["podSelector"]["matchLabels"],
        find(objs, "Service", f"{NAME}-metrics")["spec"]["selector"],
    ]
    for selector in rebalancer_selectors:
        assert matches(selector, rebalancer_pod) and not matches(selector, extender_pod)
    # Each ServiceMonitor selects its own Services only (the extender's pod: its metrics
    # and kube-scheduler's).
    services = {
        s["metadata"]["name"]: s["metadata"]["labels"] for s in objs if s["kind"] == "Service"
    }
    own = {
        RELEASE: [f"{RELEASE}-metrics", f"{RELEASE}-scheduler-metrics"],
        NAME: [f"{NAME}-metrics"],
    }
    for monitor, wanted in own.items():
        selector = find(objs, "ServiceMonitor", monitor)["spec"]["selector"]["matchLabels"]
        assert [n for n, labels in services.items() if matches(selector, labels)] == wanted
    # The extender's selector is unchanged (Deployment selectors are immutable).
    assert find(objs, "Deployment", RELEASE)["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": RELEASE,
        "app.kubernetes.io/instance": RELEASE,
    }
    assert rebalancer_pod["app.kubernetes.io/component"] == "rebalancer"


def test_monitoring_and_network_policy_for_the_metrics_port() -> None:
    values = {
        "rebalancer": {"enabled": True, "metricsPort": 9100},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}},
        "networkPolicy": {"enabled": True},
    }
    objs = render(values)
    service = find(objs, "Service", f"{NAME}-metrics")
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8888, "targetPort": "metrics", "protocol": "TCP"}
    ]
    monitor = find(objs, "ServiceMonitor", NAME)
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http-metrics"]
    policy = find(objs, "NetworkPolicy", NAME)
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9100, "protocol": "TCP"}]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # No PodDisruptionBudget for the rebalancer: a standby takes over the Lease.
    assert not [o for o in objs if o["kind"] == "PodDisruptionBudget"]


# --- schemas, lint, notes ---------------------------------------------------------------

FULL: dict[str, Any] = {
    "rebalancer": {"enabled": True, "logFormat": "json"},
    "metrics": {"serviceMonitor": {"enabled": True}},
    "networkPolicy": {"enabled": True},
    "extender": {
        "prometheusAuth": {"basicAuth": {"username": "u", "secretName": "prom-basic"}},
        "extraVolumes": [{"name": "x", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}],
    },
    "policy": {"rebalance": {"mode": "evict", "leaseNamespace": "leases"}},
}


@pytest.mark.parametrize("values", [ON, FULL], ids=["enabled", "everything"])
def test_manifests_validate_against_kubernetes_schemas(values: dict[str, Any]) -> None:
    assert schema_problems(render(values)) == []


@pytest.mark.parametrize("values", [ON, FULL], ids=["enabled", "everything"])
def test_helm_lint_strict(values: dict[str, Any]) -> None:
    report = helm.lint(
        CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, json.dumps(report, indent=2)


def test_values_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    block = schema["properties"]["rebalancer"]
    assert block["additionalProperties"] is False
    assert block["properties"]["serviceAccount"]["additionalProperties"] is False
    assert schema_errors(ON) == [] and schema_errors(FULL) == []
    # The mode is a policy key (generated from extender/policy/settings.py), not a chart value.
    assert "mode" not in block["properties"]
    assert schema["properties"]["policy"]["properties"]["rebalance"]["properties"]["mode"][
        "enum"
    ] == ["dry-run", "evict"]


@pytest.mark.parametrize(
    ("values", "where"),
    [
        pytest.param({"rebalancer": {"mode": "evict"}}, "mode", id="mode-is-a-policy-key"),
        pytest.param({"rebalancer": {"metricsPort": 0}}, "metricsPort", id="bad-port"),
        pytest.param({"rebalancer": {"logFormat": "xml"}}, "logFormat", id="bad-log-format"),
        pytest.param({"rebalancer": {"replicas": 0}}, "replicas", id="no-replicas"),
        pytest.param({"policy": {"rebalance": {"mode": "force"}}}, "mode", id="bad-policy-mode"),
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert where in str(caught.value), str(caught.value)
    assert any(where in e for e in schema_errors(values))


def test_notes_tell_how_to_watch_it() -> None:
    notes = render_mod.render_chart(ON, name=RELEASE, namespace=NAMESPACE)[
        f"{RELEASE}/templates/NOTES.txt"
    ]
    assert f"deploy/{NAME}" in notes
    assert "mode evict" in notes and "policy.rebalance.mode=dry-run" in notes
    assert "get lease decice-rebalancer" in notes
    dry = render_mod.render_chart(
        {"policy": {"rebalance": {"mode": "dry-run"}}}, name=RELEASE, namespace=NAMESPACE
    )[f"{RELEASE}/templates/NOTES.txt"]
    assert "mode dry-run" in dry and "policy.rebalance.mode=evict" in dry
    off = render_mod.render_chart(OFF, name=RELEASE, namespace=NAMESPACE)
    assert "ebalancer" not in off[f"{RELEASE}/templates/NOTES.txt"]
