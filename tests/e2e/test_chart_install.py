"""The chart installed on the real kube-apiserver (v1.36), as `helm install` does it
(helm-python-sdk's Config.install: the Helm v4 SDK, the cluster's own capabilities), with
every values file as it stands; the accounts it creates may do what their containers do
(SubjectAccessReviews); the Prometheus Operator's objects appear only once the cluster
serves monitoring.coreos.com/v1. No kubelet runs, so no pod starts: the objects are what
is checked."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.harness.controlplane import ApiError, ControlPlane, Kube

pytestmark = pytest.mark.e2e

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "decice-extender"
CASES = ["default", *sorted(p.stem for p in (CHART / "ci").glob("*-values.yaml"))]
_RELEASES = itertools.count(1)

#: What the extender's account must be allowed (its ClusterRole), as the extender asks.
EXTENDER_NEEDS = [
    ("", "nodes", "list"), ("", "nodes", "watch"), ("", "pods", "get"), ("", "pods", "watch"),
    ("", "pods/binding", "create"), ("events.k8s.io", "events", "create"),
]  # fmt: skip
#: What the shadow's account may do: read, nothing else.
SHADOW_NEEDS = [("", "pods", "watch"), ("", "nodes", "list")]
SHADOW_REFUSED = [("", "pods/binding", "create"), ("", "pods", "patch")]
#: What the rebalancer's account needs (it ships on beside the extender, evicting).
REBALANCER_NEEDS = [
    ("", "pods", "list"), ("", "pods/eviction", "create"),
    ("policy", "poddisruptionbudgets", "list"), ("coordination.k8s.io", "leases", "create"),
]  # fmt: skip

#: Stand-ins for the Prometheus Operator's CRDs: the same group, version and kinds, any
#: content (the real ones validate the objects; tests/deploy checks their fields).
OPERATOR_CRDS = [("servicemonitors", "ServiceMonitor"), ("prometheusrules", "PrometheusRule")]


def values_for(case: str) -> dict[str, Any]:
    if case == "default":
        return {}
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / f"{case}.yaml").read_text())
    return loaded or {}


def allowed(kube: Kube, account: str, namespace: str, group: str, resource: str, verb: str) -> bool:
    resource, _, subresource = resource.partition("/")
    review = kube.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                "resourceAttributes": {
                    "group": group, "resource": resource, "subresource": subresource,
                    "verb": verb, "namespace": namespace,
                },
            },
        },
    )  # fmt: skip
    return bool(review["status"].get("allowed"))


@contextlib.contextmanager
def released(control_plane: ControlPlane, values: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """A fresh release in a namespace of its own, as `helm install --create-namespace`
    (a new SDK config each time: it reads the cluster's API versions anew): (its name, the
    release); uninstalled, and its namespace deleted, afterwards."""
    name = f"chart-{next(_RELEASES)}"
    config = helm.Config(kubeconfig_path=control_plane.kubeconfig(), namespace=name)
    try:
        with helm.Chart.load(CHART) as chart:
            release = config.install(chart, name, values, namespace=name, create_namespace=True)
        try:
            yield name, release
        finally:
            config.uninstall(name)
            control_plane.kube.delete_namespace(name)
    finally:
        config.close()


def kinds(release: dict[str, Any]) -> set[str]:
    return {doc["kind"] for doc in yaml.safe_load_all(release["manifest"]) if doc}


@pytest.mark.parametrize("case", CASES)
def test_every_values_file_installs_under_its_own_rbac(
    control_plane: ControlPlane, case: str
) -> None:
    kube = control_plane.kube
    values = values_for(case)
    with released(control_plane, values) as (name, release):
        assert release["status"] == "deployed", release
        assert not kinds(release) & {"ServiceMonitor", "PrometheusRule"}  # no operator here
        deployments = {
            d["metadata"]["name"]: d
            for d in kube.get(f"/apis/apps/v1/namespaces/{name}/deployments")["items"]
        }
        shadow = values.get("mode") == "shadow"
        moving = [n for n in deployments if n.endswith("-rebalancer")]
        assert len(moving) == (0 if shadow else 1), sorted(deployments)  # on unless shadow
        rebalancer = deployments.pop(moving[0]) if moving else None
        if rebalancer is not None:
            moves = rebalancer["spec"]["template"]["spec"]["serviceAccountName"]
            for group, resource, verb in REBALANCER_NEEDS:
                assert allowed(kube, moves, name, group, resource, verb), (resource, verb)
        [deployment] = deployments.values()
        spec = deployment["spec"]["template"]["spec"]
        account = spec["serviceAccountName"]
        for group, resource, verb in SHADOW_NEEDS if shadow else EXTENDER_NEEDS:
            assert allowed(kube, account, name, group, resource, verb), (resource, verb)
        for group, resource, verb in SHADOW_REFUSED if shadow else []:
            assert not allowed(kube, account, name, group, resource, verb), (resource, verb)
        images = {c["name"]: c["image"] for c in spec["containers"]}
        if not shadow:  # the scheduler follows the API server's version (v1.36.2 here)
            assert images["kube-scheduler"] == "registry.k8s.io/kube-scheduler:v1.36.2"
        extender = images["shadow" if shadow else "extender"]
        assert extender == "ghcr.io/decice/decice-extender:0.1.0"


def _crd(plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def test_the_operator_objects_come_once_the_cluster_serves_their_api(
    control_plane: ControlPlane,
) -> None:
    kube = control_plane.kube
    monitoring = values_for("monitoring-values")
    values = {
        **monitoring,
        "metrics": {**monitoring["metrics"], "prometheusRule": {"enabled": True}},
    }
    with released(control_plane, values) as (_, release):
        assert not kinds(release) & {"ServiceMonitor", "PrometheusRule"}
        assert "Not created: the ServiceMonitor and PrometheusRule" in release["notes"]
    crds = [_crd(plural, kind) for plural, kind in OPERATOR_CRDS]
    try:
        for crd in crds:
            kube.apply(crd)
        wanted = {plural for plural, _ in OPERATOR_CRDS}
        kube.wait_until(lambda: wanted <= served(kube), 30, "the API serves the operator's kinds")
        with released(control_plane, values) as (name, release):
            assert kinds(release) >= {"ServiceMonitor", "PrometheusRule"}
            assert "Not created" not in release["notes"]
            path = f"/apis/monitoring.coreos.com/v1/namespaces/{name}/servicemonitors"
            monitors = {m["metadata"]["name"]: m for m in kube.get(path)["items"]}
            [moves] = [n for n in monitors if n.endswith("-rebalancer")]  # it ships on
            monitors.pop(moves)
            [monitor] = monitors.values()
            ports = [e["port"] for e in monitor["spec"]["endpoints"]]
            assert ports == ["http-metrics", "https-metrics"]
    finally:
        for crd in crds:
            kube.delete(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
            )


def served(kube: Kube) -> set[str]:
    """The resources monitoring.coreos.com/v1 serves (none while the group is unknown)."""
    try:
        return {r["name"] for r in kube.get("/apis/monitoring.coreos.com/v1")["resources"]}
    except ApiError:
        return set()
