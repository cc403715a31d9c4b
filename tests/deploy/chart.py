"""The chart renderer (deploy/render.py, a script, not a package module) loaded once for
every chart test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load_render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("deploy_render", module)
    spec.loader.exec_module(module)
    return module


render_mod = _load_render_module()
