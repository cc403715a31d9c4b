"""The Dockerfile, checked without a Docker engine.

A parse asserts its shape (stages, numeric USER, ENTRYPOINT, no run-time writes); a slow
test repeats its install steps: build the wheel from exactly what the Dockerfile COPYs,
install it into a fresh venv, run the console script.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import dockerfile_parse
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[dict[str, str]]:
    parser = dockerfile_parse.DockerfileParser(path=str(DOCKERFILE))
    parsed: list[dict[str, str]] = parser.structure
    return parsed


def stages() -> list[list[dict[str, str]]]:
    out: list[list[dict[str, str]]] = []
    for ins in instructions():
        if ins["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def build_args() -> dict[str, str]:
    args = {}
    for ins in instructions():
        if ins["instruction"] == "FROM":
            break
        if ins["instruction"] == "ARG" and "=" in ins["value"]:
            key, value = ins["value"].split("=", 1)
            args[key] = value
    return args


def resolve(text: str) -> str:
    for key, value in build_args().items():
        text = text.replace("${" + key + "}", value).replace("$" + key, value)
    return text


def copy_sources(stage: list[dict[str, str]]) -> list[str]:
    sources: list[str] = []
    for ins in stage:
        if ins["instruction"] == "COPY" and "--from" not in ins["value"]:
            sources += shlex.split(ins["value"])[:-1]
    return sources


def test_multi_stage_on_python_slim() -> None:
    froms = [resolve(s[0]["value"]).split() for s in stages()]
    assert len(froms) >= 2
    assert all(f[0] == "python:3.11-slim" for f in froms), froms
    assert [f[-1] for f in froms] == ["build", "runtime"]
    runtime = stages()[-1]
    assert any(i["instruction"] == "COPY" and "--from=build" in i["value"] for i in runtime)
    assert not any(i["instruction"] == "ADD" for i in instructions())


def test_runtime_is_numeric_non_root_and_read_only_friendly() -> None:
    runtime = stages()[-1]
    users = [i["value"] for i in runtime if i["instruction"] == "USER"]
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, users  # runAsNonRoot refuses a user name
    assert not gid or gid.isdigit()
    env = " ".join(i["value"] for i in runtime if i["instruction"] == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    build = " ".join(i["value"] for i in stages()[0] if i["instruction"] == "RUN")
    assert "compileall" in build  # bytecode is written at build time, never at run time
    assert not any(i["instruction"] == "RUN" for i in runtime)  # nothing to run as root later


def test_entrypoint_serves_the_mounted_config() -> None:
    runtime = stages()[-1]
    [entrypoint] = [json.loads(i["value"]) for i in runtime if i["instruction"] == "ENTRYPOINT"]
    [cmd] = [json.loads(i["value"]) for i in runtime if i["instruction"] == "CMD"]
    assert entrypoint == ["decice-extender", "serve"]
    assert cmd == ["--config", "/etc/decice/extender.yaml"]


def test_copied_sources_exist_and_are_not_docker_ignored() -> None:
    sources = copy_sources(stages()[0])
    assert {"pyproject.toml", "extender", "requirements/runtime.txt"} <= {
        s.rstrip("/") for s in sources
    }
    ignore = (ROOT / ".dockerignore").read_text().split()
    for source in sources:
        assert (ROOT / source).exists(), source
        path = Path(source.rstrip("/"))
        admitted = {f"!{path}", f"!{path}/"} | {f"!{parent}/" for parent in path.parents}
        assert admitted & set(ignore), source


@pytest.mark.slow
def test_install_steps_in_a_clean_venv(tmp_path: Path) -> None:
    """What the build stage runs: pip install of the COPYed tree into a fresh venv (~15 s)."""
    context = tmp_path / "context"
    context.mkdir()
    for source in copy_sources(stages()[0]):
        src = ROOT / source.rstrip("/")
        assert src.exists(), f"the Dockerfile COPYs {source}, which is not in the repository"
        if src.is_dir():
            shutil.copytree(src, context / src.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, context / src.name)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    pip = [sys.executable, "-m", "pip"]
    wheels = tmp_path / "wheels"
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(context)],
        check=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    [wheel] = wheels.glob("decice_extender-*.whl")
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    # The outer pip installs into the new venv (--python): no pip bootstrap, same cache.
    subprocess.run(
        [*pip, "--python", str(python), "install", "--quiet", "--no-compile", str(wheel)],
        check=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    script = target / "bin" / "decice-extender"
    help_text = subprocess.run(
        [str(script), "--help"], check=True, capture_output=True, text=True, env=env, cwd=tmp_path
    ).stdout
    assert "serve" in help_text
    serve_help = subprocess.run(
        [str(script), "serve", "--help"], check=True, capture_output=True, text=True, env=env
    ).stdout
    assert "--config" in serve_help


def test_the_service_never_imports_what_the_image_leaves_uncompiled() -> None:
    """The Dockerfile compiles no bytecode for kubernetes.aio (26 MB of the image): with a
    read-only root filesystem, a module imported without its bytecode is compiled again at
    every start. Every module of extender imported in a fresh interpreter: none of it."""
    build = " ".join(i["value"] for i in stages()[0] if i["instruction"] == "RUN")
    skipped = re.findall(r'-x "([^"]+)"', build)
    assert skipped == ["/kubernetes/aio/"], skipped
    probe = (
        "import importlib, pkgutil, sys, extender\n"
        "for m in pkgutil.walk_packages(extender.__path__, 'extender.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = done.stdout.split()
    assert "kubernetes.client" in loaded  # the probe did import the Kubernetes client
    assert not [m for m in loaded if m.startswith("kubernetes.aio")]
