"""The package keeps its map: every module lives in a subpackage of extender.PACKAGES and
stays small; pyproject.toml's import-linter contracts are the ones the map generates
(tests/architecture.py), and lint-imports, the one import enforcer, keeps them: each
subpackage imports only the subpackages (and outside libraries, extender.LIBRARIES) the
map allows."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import extender
from tests import architecture

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "extender"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 200


def allowed() -> dict[str, frozenset[str]]:
    """subpackage -> the other subpackages it may import, as extender.PACKAGES says."""
    return architecture.allowed()


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def package_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def test_the_map_names_every_subpackage_and_only_those() -> None:
    on_disk = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(allowed()) == on_disk


def test_every_module_is_in_a_subpackage() -> None:
    loose = [p.name for p in modules() if package_of(p) is None]
    assert sorted(loose) == ["__init__.py", "__main__.py"]


def test_modules_and_classes_stay_small() -> None:
    big: list[str] = []
    for path in modules():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(ROOT)}: class {node.name} {size} lines")
    assert not big, "\n".join(big)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the package found under `root`, with the repository's contracts."""
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_contracts_are_kept() -> None:
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_the_contracts_catch_an_import_against_the_map(tmp_path: Path) -> None:
    """Wherever the import statement is: in a function, or for type checking only."""
    shutil.copytree(PACKAGE, tmp_path / "extender", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "extender" / "decisions" / "leak.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from extender.metrics import usage\n"
        "def f() -> None:\n"
        "    from extender.cluster.client import KubeClient\n"
    )
    assert "cluster" not in allowed()["decisions"] and "metrics" not in allowed()["decisions"]
    run = lint_imports(tmp_path)
    assert run.returncode != 0
    assert "extender.decisions.leak -> extender.cluster.client (l.5)" in run.stdout
    assert "extender.decisions.leak -> extender.metrics.usage (l.3)" in run.stdout


def test_the_contracts_are_the_ones_the_map_generates() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert architecture.current(text) == architecture.contracts(), (
        "pyproject.toml's import rules differ from extender.PACKAGES / LIBRARIES: "
        "run python -m tests.architecture --write"
    )


def test_the_generated_contracts_say_what_the_map_says() -> None:
    """Read back from TOML: each subpackage is forbidden exactly the others it may not
    import, and each library every subpackage but its owners."""
    contracts = tomllib.loads(architecture.contracts())["tool"]["importlinter"]["contracts"]
    forbidden: dict[str, set[str]] = {}
    for c in contracts:
        assert c["type"] == "forbidden" and c["allow_indirect_imports"] is True
        for source in c["source_modules"]:
            forbidden.setdefault(source.removeprefix("extender."), set()).update(
                m.removeprefix("extender.") for m in c["forbidden_modules"]
            )
    everything = set(extender.PACKAGES) | set(extender.LIBRARIES)
    for name, may in allowed().items():
        owned = {lib for lib, owners in extender.LIBRARIES.items() if name in owners}
        assert forbidden.get(name, set()) == everything - may - owned - {name}, name
    assert "metrics" in forbidden["cluster"]  # the rule the old layers contract missed
    assert "kubernetes" in forbidden["simulation"]


def test_the_contracts_check_catches_a_map_change(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    changed = dict(extender.PACKAGES)
    changed["cluster"] = extender.Package("", ("metrics", "decisions", "policy", "errors"))
    monkeypatch.setattr(extender, "PACKAGES", changed)
    assert architecture.current(text) != architecture.contracts()
    assert (
        "extender.metrics"
        not in architecture.rewritten(text)
        .split('name = "extender.cluster imports only')[1]
        .split("[[tool")[0]
    )
