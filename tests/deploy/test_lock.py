"""The lock files (requirements/*.txt, written by scripts/lock from pyproject.toml) pin
every dependency with hashes, still satisfy pyproject.toml, and are what the Dockerfile and
scripts/setup (so CI) install. A dependency added to pyproject.toml without `scripts/lock`
fails here, naming it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?: ; (?P<marker>.+?))?(?: \\)?$"
)


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pins(name: str) -> dict[str, str]:
    """Package (canonical name) -> pinned version; every pin must carry hashes."""
    found: dict[str, str] = {}
    lines = (LOCKS / name).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        match = _PIN.match(line)
        if match is None:
            continue
        assert lines[number + 1].lstrip().startswith("--hash=sha256:"), (
            f"{name}: {line} has no hash"
        )
        found[canonicalize_name(match.group("name"))] = match.group("version")
    assert found, f"{name} pins nothing"
    return found


def unmet(requirements: list[str], pinned: dict[str, str]) -> list[str]:
    problems = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11"}):
            continue
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name} is not locked")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} does not satisfy {req.specifier}")
    return problems


def wanted(lock: str) -> list[str]:
    """What pyproject.toml asks of each lock."""
    data = pyproject()
    project = data["project"]
    build = data["build-system"]
    assert isinstance(project, dict) and isinstance(build, dict)
    runtime: list[str] = project["dependencies"]
    test: list[str] = project["optional-dependencies"]["test"]
    backend: list[str] = build["requires"]
    return {"runtime.txt": runtime, "test.txt": [*runtime, *test], "build.txt": backend}[lock]


@pytest.mark.parametrize("lock", ["runtime.txt", "test.txt", "build.txt"])
def test_each_lock_satisfies_pyproject(lock: str) -> None:
    problems = unmet(wanted(lock), pins(lock))
    assert not problems, f"requirements/{lock}: {problems}; run scripts/lock"


def test_the_runtime_and_test_locks_agree() -> None:
    runtime, test = pins("runtime.txt"), pins("test.txt")
    assert {name: test.get(name) for name in runtime} == runtime


def test_the_dockerfile_and_ci_install_the_locks_with_hashes() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(
        r"pip install --require-hashes [^\n]*\\\n"
        r"\s+-r requirements/build.txt -r requirements/runtime.txt",
        dockerfile,
    ), "the Dockerfile installs the locked dependencies with --require-hashes"
    setup = (ROOT / "scripts" / "setup").read_text(encoding="utf-8")
    assert "pip install -q --require-hashes -r requirements/test.txt" in setup
