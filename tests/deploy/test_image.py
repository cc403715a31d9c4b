"""The built image (scripts/image), run as the chart runs it: uid 65532, the policy mounted
read-only at /etc/decice. Marked `image`: left out of the default run, run by .ci/run's
image step (`pytest --image -m image`), which builds the image first.

- the README's curl session (`scripts/demo` on the demo policy) gets the answers the
  README prints, from the image's process;
- that process runs as 65532, not as root;
- the image carries no pip, no setuptools and no tests, and its /metrics carry
  decice_build_info with the project's version.

The image binding pods on the real control plane is tests/e2e/test_image.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender import __version__
from tests.harness.image import ImageService, engine, running_image_service, uids_of

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "kube-scheduler"
_CURL = re.compile(
    r"^\$ curl -s -H 'Content-Type: application/json' --data-binary @(\S+) \S+/(\w+)$"
)


def readme_curl_session() -> list[tuple[str, Path, str]]:
    """(verb, request body, the answer the README shows) of each POST in README.md's
    "Try it with curl" session."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Try it with curl", 1)[1].split("\n## ", 1)[0]
    lines = section.split("```console", 1)[1].split("```", 1)[0].strip().splitlines()
    calls = []
    for line, answer in zip(lines, [*lines[1:], ""], strict=True):
        match = _CURL.match(line)
        if match:
            calls.append((match.group(2), ROOT / match.group(1), answer))
    return calls


def demo_policy() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    return loaded


@pytest.fixture(scope="module")
def demo(image: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_image_service(image, demo_policy(), tmp_path_factory.mktemp("image")) as svc:
        yield svc


def test_the_readme_curl_session_answers_as_the_readme_shows(demo: ImageService) -> None:
    calls = readme_curl_session()
    assert [verb for verb, _, _ in calls] == ["filter", "prioritize"]
    for verb, body, shown in calls:
        status, answer = demo.post(f"/{verb}", json.loads(body.read_text()))
        assert status == 200, answer
        assert json.loads(answer) == json.loads(shown), verb


def test_the_process_runs_as_the_non_root_user(demo: ImageService) -> None:
    assert uids_of(demo.port) == {65532}


def test_metrics_carry_the_build_info(demo: ImageService) -> None:
    status, body = demo.get("/metrics")
    assert status == 200
    [line] = [x for x in body.decode().splitlines() if x.startswith("decice_build_info{")]
    assert f'version="{__version__}"' in line and 'python_version="3.11.' in line, line


def image_command(image: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`argv` run in a fresh container of `image` as uid 65532."""
    if engine() == "buildah":
        container = subprocess.run(
            ["buildah", "from", "--quiet", image], capture_output=True, text=True, check=True
        ).stdout.strip()
        try:
            return subprocess.run(
                ["buildah", "run", "--isolation", "chroot", "--network", "host",
                 "--user", "65532:65532", container, "--", *argv],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    return subprocess.run(
        [engine(), "run", "--rm", "--user", "65532:65532", "--entrypoint", argv[0], image,
         *argv[1:]],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_image_holds_no_build_tools_and_no_tests(image: str) -> None:
    probe = """
import importlib.util, json, sys
print(json.dumps({
    "modules": {
        m: importlib.util.find_spec(m) is not None
        for m in ("pip", "setuptools", "pytest", "tests", "extender")
    },
    "prefix": sys.prefix,
}))
"""
    done = image_command(image, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["prefix"] == "/opt/venv"
    assert found["modules"] == {
        "pip": False, "setuptools": False, "pytest": False, "tests": False, "extender": True
    }  # fmt: skip
