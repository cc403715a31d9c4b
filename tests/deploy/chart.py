"""The chart renderer (deploy/render.py, a script, not a package module) loaded once for
every chart test."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate

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
