"""The chart's shadow mode (`mode: shadow`): one Deployment running `decice-extender shadow`
alone (no kube-scheduler, no scheduler config, no lease), a read-only ClusterRole (list
and watch pods and nodes, nothing else) bound to the release's ServiceAccount, the
metrics port's Service / ServiceMonitor / NetworkPolicy as in extender mode; the default
(`mode: extender`) renders byte for byte what the chart rendered before the switch.
Rendered offline with helm-python-sdk, validated with kubernetes-validate; the RBAC is
checked against the requests a real shadow service makes to the fake API server."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml
from starlette.testclient import TestClient

from extender.cli.main import parser
from extender.cluster.client import KubeClient
from extender.metrics.providers import StaticProvider
from extender.policy.loading import load_settings
from extender.service.compose import build_shadow
from tests.deploy.chart import KUBE_VERSION, grants, rbac_of, render_mod, schema_problems
from tests.harness.kubeapi import FakeKubeAPI, KubeRequest, client_for
from tests.harness.loopback import wait_until

ROOT = Path(__file__).resolve().parents[2]
CHART_PATH = "deploy/helm/decice-extender"
CHART = ROOT / CHART_PATH
RELEASE = "decice-extender"
NAMESPACE = "decice-system"
SHADOW: dict[str, Any] = {"mode": "shadow"}
ROLE = f"{RELEASE}-shadow"
POLICY_PATH = "/etc/decice/extender.yaml"

#: Everything the shadow may do, cluster-wide: (apiGroup, resource, verb).
GRANTS = {
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
}


def values_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / name).read_text(encoding="utf-8"))
    return loaded


def render(
    values: dict[str, Any], *, name: str = RELEASE, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    docs = render_mod.render_chart(values, name=name, namespace=namespace)
    return [yaml.safe_load(doc) for doc in render_mod.documents(docs)]


def find(objs: list[dict[str, Any]], kind: str, name: str = RELEASE) -> dict[str, Any]:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"expected one {kind} {name}, found {len(hits)}"
    return hits[0]


def pod_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = find(objs, "Deployment")["spec"]["template"]["spec"]
    return spec


def notes(values: dict[str, Any]) -> str:
    text: str = render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)[
        f"{RELEASE}/templates/NOTES.txt"
    ]
    return text


def schema_errors(values: dict[str, Any]) -> list[str]:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    with helm.Chart.load(CHART) as chart:
        merged = chart.merge_values(values)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(merged)
    ]


# --- the switch -----------------------------------------------------------------------------


def test_mode_defaults_to_extender_and_is_an_enum() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["mode"] == "extender"
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    mode = schema["properties"]["mode"]
    assert (mode["type"], mode["enum"], mode["default"]) == (
        "string",
        ["extender", "shadow"],
        "extender",
    )
    assert "mode" in schema["required"]
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError, match="mode"):
        chart.render({"mode": "shadwo"}, name=RELEASE, namespace=NAMESPACE)
    assert any(e.startswith("mode:") for e in schema_errors({"mode": "shadwo"}))
    assert schema_errors(SHADOW) == []


def test_shadow_mode_creates_exactly_these_objects() -> None:
    assert {(o["kind"], o["metadata"]["name"]) for o in render(SHADOW)} == {
        ("ServiceAccount", RELEASE),
        ("ConfigMap", f"{RELEASE}-policy"),
        ("ClusterRole", ROLE),
        ("ClusterRoleBinding", ROLE),
        ("Deployment", RELEASE),
    }
    # With the ci file: the metrics port's Service, ServiceMonitor and NetworkPolicy too.
    assert {
        (o["kind"], o["metadata"]["name"]) for o in render(values_file("shadow-values.yaml"))
    } == {
        ("ServiceAccount", RELEASE),
        ("ConfigMap", f"{RELEASE}-policy"),
        ("ClusterRole", ROLE),
        ("ClusterRoleBinding", ROLE),
        ("Deployment", RELEASE),
        ("Service", f"{RELEASE}-metrics"),
        ("ServiceMonitor", RELEASE),
        ("NetworkPolicy", RELEASE),
    }


SHADOW_CASES = [
    pytest.param(SHADOW, id="bare"),
    pytest.param(values_file("shadow-values.yaml"), id="ci-shadow-values"),
    pytest.param(
        {
            **SHADOW,
            "metrics": {
                "service": {"enabled": True},
                "dashboard": {"enabled": True},
                "prometheusRule": {"enabled": True},
            },
            "networkPolicy": {"enabled": True, "schedulerFrom": [{"podSelector": {}}]},
            "extender": {
                "prometheusAuth": {"bearerToken": {"secretName": "prom-token"}},
                "extraVolumes": [{"name": "x", "emptyDir": {}}],
                "extraVolumeMounts": [{"name": "x", "mountPath": "/x"}],
            },
            "replicas": 0,
        },
        id="everything-on",
    ),
]


@pytest.mark.parametrize("values", SHADOW_CASES)
def test_shadow_manifests_validate_against_kubernetes_schemas(values: dict[str, Any]) -> None:
    objs = render(values)
    assert schema_problems(objs) == []
    report = helm.lint(
        CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, json.dumps(report, indent=2)


# --- the Deployment -------------------------------------------------------------------------


@pytest.mark.parametrize("port", [8889, 9100])
def test_one_container_runs_decice_extender_shadow(port: int) -> None:
    objs = render({**SHADOW, "extender": {"metricsPort": port}})
    deployment = find(objs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    pod = pod_spec(objs)
    [c] = pod["containers"]
    assert c["name"] == "shadow"
    extender = pod_spec(render({"extender": {"metricsPort": port}}))["containers"][1]
    assert c["image"] == extender["image"] == "ghcr.io/decice/decice-extender:0.1.0"
    assert "command" not in c  # the image's entrypoint is decice-extender
    assert c["args"] == [
        "shadow", "--config", POLICY_PATH, "--host", "0.0.0.0", "--port", str(port),
        "--log-level", "info",
    ]  # fmt: skip
    assert c["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    # The CLI takes these args as they are.
    args = parser().parse_args(c["args"])
    assert (args.command, args.config, args.host, args.port) == (
        "shadow",
        POLICY_PATH,
        "0.0.0.0",
        port,
    )
    # The policy ConfigMap at the path of --config, and nothing of the scheduler's.
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["policy"] == {"name": "policy", "mountPath": "/etc/decice", "readOnly": True}
    assert volumes["policy"] == {"name": "policy", "configMap": {"name": f"{RELEASE}-policy"}}
    assert set(mounts) == set(volumes) == {"policy", "tmp"}
    assert list(deployment["spec"]["template"]["metadata"]["annotations"]) == ["checksum/policy"]
    assert pod["serviceAccountName"] == RELEASE


def test_pod_is_locked_down_and_configured_like_the_extender() -> None:
    extras = {
        "prometheusUrl": "http://prom.monitoring.svc:9090",
        "prometheusAuth": {"ca": {"secretName": "prom-ca", "key": "bundle.pem"}},
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
        "extraEnvFrom": [{"secretRef": {"name": "decice-env"}}],
        "extraVolumes": [{"name": "client-cert", "secret": {"secretName": "client"}}],
        "extraVolumeMounts": [{"name": "client-cert", "mountPath": "/etc/client"}],
    }
    knobs = {
        "priorityClassName": "low",
        "nodeSelector": {"pool": "system"},
        "podLabels": {"team": "x"},
        "podAnnotations": {"a": "b"},
    }
    shadow = render({**SHADOW, "extender": extras, **knobs})
    extender = render({"extender": extras, **knobs})
    pod, ext_pod = pod_spec(shadow), pod_spec(extender)
    [c] = pod["containers"]
    ext = ext_pod["containers"][1]
    for key in ("env", "envFrom", "volumeMounts", "resources", "securityContext"):
        assert c[key] == ext[key], key
    assert pod["volumes"] == [v for v in ext_pod["volumes"] if v["name"] != "scheduler-config"]
    for key in ("securityContext", "priorityClassName", "nodeSelector", "serviceAccountName"):
        assert pod[key] == ext_pod[key], key
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["runAsNonRoot"] is True
    template = find(shadow, "Deployment")["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "x" and template["annotations"]["a"] == "b"
    # A new policy file rolls the pod: the checksum of the rendered policy ConfigMap.
    rendered = render_mod.render_chart({**SHADOW, "extender": extras, **knobs})
    policy = rendered[f"{RELEASE}/templates/configmap-policy.yaml"]
    assert template["annotations"]["checksum/policy"] == hashlib.sha256(policy.encode()).hexdigest()


def test_no_scheduler_anything() -> None:
    for values in (SHADOW, values_file("shadow-values.yaml")):
        objs = render(values)
        names = {o["metadata"]["name"] for o in objs}
        assert not [n for n in names if "scheduler" in n or "leader-election" in n], names
        assert not [o for o in objs if o["kind"] in {"Role", "RoleBinding"}]
        assert not [o for o in objs if o["metadata"].get("namespace", NAMESPACE) != NAMESPACE]
        refs = {o["roleRef"]["name"] for o in objs if "roleRef" in o}
        assert refs == {ROLE}  # no system:kube-scheduler, system:volume-scheduler, auth reader
        text = json.dumps(objs)
        assert "kube-scheduler" not in text and "10259" not in text
        assert "registry.k8s.io" not in text
        # The labels say what it is; the selector labels (Service, PDB) stay the same.
        for obj in objs:
            assert obj["metadata"]["labels"]["app.kubernetes.io/component"] == "shadow"


# --- RBAC ------------------------------------------------------------------------------------


def test_cluster_role_grants_exactly_list_and_watch_of_pods_and_nodes() -> None:
    objs = render(SHADOW)
    role = find(objs, "ClusterRole", ROLE)
    assert {(g, r, v) for g, r, v, _ in grants(role)} == GRANTS
    assert all("resourceNames" not in rule for rule in role["rules"])
    # The only role in the release: nothing binds, evicts, patches, posts Events or leases.
    assert [o for o in objs if o["kind"] in {"ClusterRole", "Role"}] == [role]


@pytest.mark.parametrize(
    ("values", "namespace", "account"),
    [
        pytest.param(SHADOW, NAMESPACE, RELEASE, id="default"),
        pytest.param({**SHADOW, "serviceAccount": {"name": "watcher"}}, "team-a", "watcher"),
    ],
)
def test_the_binding_binds_it_to_the_release_service_account(
    values: dict[str, Any], namespace: str, account: str
) -> None:
    objs = render(values, namespace=namespace)
    sa = find(objs, "ServiceAccount", account)
    assert sa["metadata"]["namespace"] == namespace
    bindings = [o for o in objs if o["kind"] in {"ClusterRoleBinding", "RoleBinding"}]
    assert bindings == [find(objs, "ClusterRoleBinding", ROLE)]
    [binding] = bindings
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    ]
    assert pod_spec(objs)["serviceAccountName"] == account


def test_rbac_of_the_request_mapping() -> None:
    def req(method: str, path: str, **query: str) -> KubeRequest:
        return KubeRequest(method, path, {k: [v] for k, v in query.items()}, None, {})

    assert rbac_of(req("GET", "/api/v1/pods", watch="true")) == ("", "pods", "watch")
    assert rbac_of(req("GET", "/api/v1/nodes", limit="500")) == ("", "nodes", "list")
    assert rbac_of(req("GET", "/api/v1/namespaces/a/pods/p")) == ("", "pods", "get")
    assert rbac_of(req("POST", "/api/v1/namespaces/a/pods/p/binding")) == (
        "",
        "pods/binding",
        "create",
    )
    assert rbac_of(req("POST", "/apis/events.k8s.io/v1/namespaces/a/events")) == (
        "events.k8s.io",
        "events",
        "create",
    )


@pytest.fixture
def shadow_api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as api:
        for i, node in enumerate(("node-a", "node-b", "node-c"), start=1):
            api.add_node(node, f"10.0.0.{i}", cpu="4")
        yield api


def test_the_role_is_what_the_shadow_calls(shadow_api: FakeKubeAPI, tmp_path: Path) -> None:
    """The rendered policy of ci/shadow-values.yaml run by a real shadow service (static
    values instead of Prometheus) against the fake API server: while it judges a placement
    of the default scheduler, its requests need exactly the ClusterRole's grants."""
    objs = render(values_file("shadow-values.yaml"))
    path = tmp_path / "extender.yaml"
    path.write_text(find(objs, "ConfigMap", f"{RELEASE}-policy")["data"]["extender.yaml"])
    settings = load_settings(path, environ={})
    assert settings.shadow.scheduler_names == ("default-scheduler",)
    assert settings.shadow.namespaces == ("web", "batch") and settings.shadow.keep == 5000
    assert (
        settings.server.metrics_port == pod_spec(objs)["containers"][0]["ports"][0]["containerPort"]
    )
    values = {"node-a": {"cpu": 0.1}, "node-b": {"cpu": 0.5}, "node-c": {"cpu": 0.95}}
    kube = KubeClient(client_for(shadow_api), timeout=2, retries=0)
    service = build_shadow(settings, provider=StaticProvider(values), kube=kube)
    with TestClient(service.app) as client:
        wait_until(lambda: all(i.status.watching for i in service.informers), 30, "watches up")
        shadow_api.add_pod("web", "p1", "uid-p1", scheduler_name="default-scheduler")
        shadow_api.assign("web", "p1", "node-c")
        assert service.shadow is not None
        observer = service.shadow
        wait_until(lambda: observer.log.seen == 1, 30, "the placement judged")
        assert client.get("/shadow").json()["verdicts"]["rejected"] == 1
    needed = {rbac_of(r) for r in shadow_api.requests}
    assert needed == GRANTS, needed


# --- the Service, ServiceMonitor and NetworkPolicy of the metrics port -------------------------


def test_metrics_port_service_monitor_and_network_policy() -> None:
    values = values_file("shadow-values.yaml")
    values["networkPolicy"]["schedulerFrom"] = [{"podSelector": {}}]  # no scheduler port here
    objs = render(values)
    pod_labels = find(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = find(objs, "Service", f"{RELEASE}-metrics")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8888, "targetPort": "metrics", "protocol": "TCP"}
    ]
    monitor = find(objs, "ServiceMonitor")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    policy = find(objs, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert [r["ports"] for r in policy["ingress"]] == [[{"port": 8889, "protocol": "TCP"}]]
    # Metrics only from metricsFrom; with none, nobody.
    objs = render({**SHADOW, "networkPolicy": {"enabled": True, "metricsFrom": []}})
    assert find(objs, "NetworkPolicy")["spec"]["ingress"] == []


def test_the_policy_configmap_is_the_extenders() -> None:
    """Rendered as in extender mode (schedulerNames, server.* included: the shadow ignores
    the verbs); only the labels say shadow."""
    values = values_file("shadow-values.yaml")
    extender = {k: v for k, v in values.items() if k != "mode"}
    shadow_cm = find(render(values), "ConfigMap", f"{RELEASE}-policy")
    extender_cm = find(render(extender), "ConfigMap", f"{RELEASE}-policy")
    assert shadow_cm["data"] == extender_cm["data"]
    policy = yaml.safe_load(shadow_cm["data"]["extender.yaml"])
    assert policy["shadow"]["schedulerNames"] == ["default-scheduler"]
    assert policy["schedulerNames"] == ["decice_sched"]


# --- refused combinations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {**SHADOW, "rebalancer": {"enabled": True}},
            r"rebalancer\.enabled=true is refused with mode: shadow",
            id="rebalancer",
        ),
        pytest.param({**SHADOW, "replicas": 2}, r"mode: shadow runs one replica", id="replicas"),
    ],
)
def test_unsafe_combinations_are_refused(values: dict[str, Any], message: str) -> None:
    """The rebalancer evicts (or posts Events in dry-run) pods of a scheduler a shadow
    release does not run, and a shadow changes nothing: refused, not silently dropped. Two
    replicas would each judge every placement: refused too."""
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmRenderError, match=message):
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    assert schema_errors(values) == []  # values the schema accepts: the template says why


def test_the_rebalancer_still_renders_with_mode_extender() -> None:
    names = {
        o["metadata"]["name"] for o in render({"mode": "extender", "rebalancer": {"enabled": True}})
    }
    assert f"{RELEASE}-rebalancer" in names


def test_the_rebalancer_on_by_default_is_off_in_a_shadow_release() -> None:
    """rebalancer.enabled unset (null, on with mode: extender) renders none with mode:
    shadow, and so does false: only an explicit true is refused."""
    for values in (SHADOW, {**SHADOW, "rebalancer": {"enabled": False}}):
        names = {o["metadata"]["name"] for o in render(values)}
        assert not [n for n in names if "rebalancer" in n], names


# --- NOTES ----------------------------------------------------------------------------------


def test_notes_tell_how_to_read_the_summary() -> None:
    text = notes(values_file("shadow-values.yaml"))
    assert "SHADOW mode" in text
    assert f"kubectl -n {NAMESPACE} port-forward deploy/{RELEASE} 8889:8889" in text
    assert "decice-extender shadow-report --url http://127.0.0.1:8889" in text
    assert "decice-extender explain NAMESPACE/NAME --url http://127.0.0.1:8889" in text
    assert f"kubectl -n {NAMESPACE} logs deploy/{RELEASE} -c shadow" in text
    assert "made by\ndefault-scheduler in web, batch (pods" in text
    assert "-c kube-scheduler" not in text and "/prioritize" not in text
    assert "Note: port 8889" not in text  # the NetworkPolicy is on
    exposed = notes({**SHADOW, "metrics": {"service": {"enabled": True}}})
    assert "every scheduler in every namespace" in exposed
    assert "Note: port 8889 (/metrics, /healthz, /readyz, /shadow, /explain)" in exposed
    assert (
        notes({**SHADOW, "extender": {"metricsPort": 9100}}).count(
            "shadow-report --url http://127.0.0.1:9100"
        )
        == 1
    )


# --- the default is what it was --------------------------------------------------------------

#: Value sets rendered by both charts: the defaults, every ci file of extender mode, and the
#: optional objects.
EXTENDER_VALUES: dict[str, dict[str, Any]] = {
    "default": {},
    **{
        p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        for p in sorted((CHART / "ci").glob("*-values.yaml"))
        if p.stem != "shadow-values"
    },
    "rebalancer-and-monitoring": {
        "rebalancer": {"enabled": True},
        "metrics": {
            "serviceMonitor": {"enabled": True},
            "dashboard": {"enabled": True},
            "prometheusRule": {"enabled": True},
        },
        "networkPolicy": {"enabled": True, "schedulerFrom": [{"podSelector": {}}]},
    },
    "tls-and-secrets": {
        "extender": {
            "tls": {
                "clientAuth": True,
                "certManager": {"enabled": True, "issuerRef": {"name": "ca"}},
            },
            "listenAddress": "0.0.0.0",
            "prometheusAuth": {"bearerToken": {"secretName": "t"}},
        },
        "scheduler": {"leaderElection": {"enabled": False}},
    },
}


@pytest.mark.parametrize("case", list(EXTENDER_VALUES))
def test_an_explicit_mode_extender_renders_what_the_default_renders(case: str) -> None:
    """`mode: extender` is the default: every template's output (NOTES.txt included) is the
    same with it said or left out. (When `mode` came in, this also compared the output with
    the chart of before, byte for byte; the extender's output has moved on since: the image
    default, log settings, kube-scheduler's metrics, the HA defaults.)"""
    values = EXTENDER_VALUES[case]
    now = render_mod.render_chart(values, name=RELEASE, namespace=NAMESPACE)
    explicit = render_mod.render_chart(
        {**values, "mode": "extender"}, name=RELEASE, namespace=NAMESPACE
    )
    assert explicit == now


def test_the_plain_manifests_are_the_defaults_and_hold_no_shadow() -> None:
    """deploy/manifests/ renders the defaults only (deploy/render.py): extender mode."""
    text = render_mod.MANIFEST.read_text(encoding="utf-8")
    assert "shadow" not in text
    assert render_mod.main(["--check"]) == 0
