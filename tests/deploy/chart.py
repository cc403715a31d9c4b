"""The chart renderer (deploy/render.py, a script, not a package module) loaded once for
every chart test."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate

from tests.harness.kubeapi import KubeRequest

ROOT = Path(__file__).resolve().parents[2]
KUBE_VERSION = "1.35.4"  # the kube-scheduler the chart ships; kubernetes-validate has 1.35


def _load_render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("deploy_render", module)
    spec.loader.exec_module(module)
    return module


render_mod = _load_render_module()


def schema_problems(objs: Iterable[dict[str, Any]]) -> list[str]:
    """Every rendered object checked against the Kubernetes schemas (strict); the
    prometheus-operator CRDs are left to the structural checks of test_chart.py."""
    problems = []
    for obj in objs:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(map(str, exc.path))
            problems.append(f"{obj['kind']}/{obj['metadata']['name']} {path}: {exc.message}")
    return problems


def rbac_of(request: KubeRequest) -> tuple[str, str, str]:
    """(apiGroup, resource, verb) a request to the Kubernetes API needs."""
    match = re.fullmatch(
        r"/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/[^/]+)?/(?P<rest>.+)",
        request.path,
    )
    assert match, request.path
    group, parts = match.group("group") or "", match.group("rest").split("/")
    resource = "/".join([parts[0], *parts[2:3]])
    named = len(parts) > 1
    if request.method == "GET":
        verb = "watch" if request.query.get("watch") == ["true"] else "get" if named else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[
            request.method
        ]
    return group, resource, verb


def grants(role: dict[str, Any]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(apiGroup, resource, verb, resourceNames) of every rule of a Role or ClusterRole."""
    return {
        (group, res, verb, tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }
