"""The release workflow (.github/workflows/release.yml), which cannot run here: parsed and
checked against the chart and the Dockerfile. It builds the image for linux/amd64 and
linux/arm64 and pushes it where the chart's default image points, with the tag the chart
defaults to (its appVersion, which is the project's version), and pushes the chart."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from extender import __version__

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CHART = ROOT / "deploy" / "helm" / "decice-extender"


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return loaded


def steps(job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow()["jobs"][job]["steps"]
    return found


def step(job: str, action: str) -> dict[str, Any]:
    [found] = [s for s in steps(job) if s.get("uses", "").split("@")[0] == action]
    return found


def test_it_runs_on_a_version_tag_with_the_rights_it_needs() -> None:
    doc = workflow()
    trigger = doc[True]  # YAML 1.1 reads the key `on` as true
    assert trigger == {"push": {"tags": ["v*.*.*"]}}
    assert doc["permissions"] == {"contents": "read", "packages": "write"}
    for job in doc["jobs"].values():
        for s in job["steps"]:
            if "uses" in s:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", s["uses"]), s["uses"]


def test_the_image_is_multi_arch_and_where_the_chart_looks() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    image = workflow()["env"]["IMAGE"]
    assert values["extender"]["image"]["repository"] == image
    assert values["extender"]["image"]["tag"] == ""  # so: the chart's appVersion
    build = step("image", "docker/build-push-action")["with"]
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["push"] is True and build["context"] == "."
    assert "GIT_COMMIT=${{ github.sha }}" in build["build-args"]
    assert "ARG GIT_COMMIT" in (ROOT / "Dockerfile").read_text(encoding="utf-8")
    meta = step("image", "docker/metadata-action")["with"]
    assert meta["images"] == "${{ env.IMAGE }}"
    assert "type=semver,pattern={{version}}" in meta["tags"].split()  # v0.1.0 -> 0.1.0
    assert {"docker/setup-qemu-action", "docker/setup-buildx-action"} <= {
        s.get("uses", "").split("@")[0] for s in steps("image")
    }


def test_the_version_is_one_everywhere() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == project["version"] == __version__
    check = next(s["run"] for s in steps("image") if "run" in s)
    assert 'version = \\"$version\\"' in check and 'appVersion: \\"$version\\"' in check


def test_the_chart_is_linted_packaged_and_pushed_after_the_image() -> None:
    job = workflow()["jobs"]["chart"]
    assert job["needs"] == "image"
    script = next(s["run"] for s in job["steps"] if "run" in s)
    for command in ("helm lint --strict deploy/helm/decice-extender", "helm package", "helm push"):
        assert command in script
    assert workflow()["env"]["CHARTS"].startswith("oci://ghcr.io/")
