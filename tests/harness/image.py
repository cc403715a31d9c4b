"""The extender's image, built by scripts/image and run as the chart runs it.

    reason = image_unavailable_reason()      # None, or one line to pytest.skip with
    tag = build_image("localhost/decice-extender:test")
    with running_image_service(tag, policy, tmp_path) as svc:   # uid 65532, read-only
        svc.post("/filter", body)

The engine is the one scripts/image picks: docker or podman where one answers, else
buildah with chroot isolation (no container runtime needed). The process runs as the
image's numeric non-root user (65532, the chart's runAsUser) with the policy and anything
else it reads mounted read-only under /etc/decice, and the host's network (it listens on
127.0.0.1 only), so a test reaches it as it reaches `decice-extender serve`
(tests/harness/service.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.harness.loopback import LOCALHOST, wait_until
from tests.harness.service import Service

ROOT = Path(__file__).resolve().parents[2]
USER = "65532:65532"
"""The Dockerfile's USER and the chart's runAsUser/runAsGroup."""
MOUNT = "/etc/decice"
"""Where the chart mounts the policy ConfigMap; the image's CMD reads extender.yaml there."""
BUILD_TIMEOUT = 900.0
"""A ceiling for a stuck build (a cold one takes about a minute here), not a measurement."""


def _answers(engine: str) -> bool:
    if shutil.which(engine) is None:
        return False
    try:
        done = subprocess.run([engine, "info"], capture_output=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def engine() -> str:
    """DECICE_IMAGE_ENGINE, else docker or podman where its daemon answers, else buildah
    (the order scripts/image follows)."""
    chosen = os.environ.get("DECICE_IMAGE_ENGINE", "")
    if chosen:
        return chosen
    return next((e for e in ("docker", "podman") if _answers(e)), "buildah")


def image_unavailable_reason() -> str | None:
    """None when an image can be built and run here; else one line saying what is missing."""
    chosen = engine()
    if chosen != "buildah":
        return None if _answers(chosen) else f"image tests: {chosen} does not answer"
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return (
            f"image tests: {' and '.join(missing)} not installed (apt-get install buildah "
            "mmdebstrap, or a working docker or podman); scripts/image installs them as root"
        )
    return None


def build_image(tag: str) -> str:
    """scripts/image TAG (raises with its output when the build fails); the tag."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "image"), tag],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"scripts/image {tag} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return tag


def readable_copy(files: Mapping[str, Path | str], where: Path) -> Path:
    """A folder the image's user may read (0755, files 0644) holding `files` (name ->
    a path to copy, or the text itself): pytest's own temporary folders are 0700 root."""
    folder = Path(tempfile.mkdtemp(prefix="decice-image-", dir=where))
    folder.chmod(0o755)
    for name, source in files.items():
        target = folder / name
        if isinstance(source, Path):
            shutil.copyfile(source, target)
        else:
            target.write_text(source)
        target.chmod(0o644)
    return folder


class ImageService(Service):
    """tests/harness/service.py's Service, its process run from the image: the same port,
    policy and requests; the policy (and `files`, e.g. a kubeconfig and its CA) copied into
    a read-only mount at /etc/decice; `env` passed into the container."""

    def __init__(
        self,
        image: str,
        policy: Mapping[str, Any],
        workdir: Path,
        env: Mapping[str, str] | None = None,
        *,
        files: Mapping[str, Path | str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(policy, workdir, env, **kwargs)
        self.image = image
        self.engine = engine()
        self.mount = readable_copy({"extender.yaml": self.config, **(files or {})}, workdir)
        self.container: str | None = None

    def argv(self) -> list[str]:
        inner = [
            "decice-extender", self.mode, "--config", f"{MOUNT}/extender.yaml",
            "--port", str(self.port), "--log-level", self.log_level,
        ]  # fmt: skip
        if self.mode in ("rebalance", "shadow"):
            inner += ["--host", LOCALHOST]
        env = [arg for key, value in self.env.items() for arg in ("--env", f"{key}={value}")]
        volume = ["-v", f"{self.mount}:{MOUNT}:ro"]
        if self.engine == "buildah":
            if self.container is None:
                self.container = subprocess.run(
                    ["buildah", "from", "--quiet", self.image],
                    capture_output=True, text=True, check=True, timeout=120,
                ).stdout.strip()  # fmt: skip
            return [
                "buildah", "run", "--isolation", "chroot", "--network", "host",
                "--user", USER, *volume, *env, self.container, "--", *inner,
            ]  # fmt: skip
        return [
            self.engine, "run", "--rm", "--network", "host", "--user", USER, "--read-only",
            *volume, *env, "--entrypoint", inner[0], self.image, *inner[1:],
        ]  # fmt: skip

    def process_env(self) -> dict[str, str]:
        """The engine's own environment: the service's reaches it through --env."""
        return dict(os.environ)

    def remove(self) -> None:
        """Stop the process and remove buildah's working container. `buildah run
        --isolation chroot` leaves its chroot child (and the service in it) running when
        killed, reparented to init: those are killed by the port they serve."""
        self.kill()
        for pid in serving(self.port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not serving(self.port), 10, "the image's processes are gone")
        if self.container is not None:
            subprocess.run(["buildah", "rm", self.container], capture_output=True, timeout=60)
            self.container = None


def serving(port: int) -> dict[int, list[str]]:
    """pid -> argv of the processes whose command line runs `decice-extender ... --port
    PORT` (the engine's client, its chroot child and the service)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, NotADirectoryError):
            continue
        if any(a.endswith("decice-extender") for a in argv) and str(port) in argv:
            found[int(proc.name)] = argv
    return found


def uids_of(port: int) -> set[int]:
    """The real uids of the processes serving `port` from the image, but for the engine's
    own client (`buildah run`, `docker run`), which runs as its caller."""
    uids: set[int] = set()
    for pid, argv in serving(port).items():
        if Path(argv[0]).name in ("buildah", "docker", "podman"):
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = next(line for line in status.splitlines() if line.startswith("Uid:"))
        uids.add(int(uid.split()[1]))
    return uids


@contextlib.contextmanager
def running_image_service(
    image: str,
    policy: Mapping[str, Any],
    workdir: Path,
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Iterator[ImageService]:
    service = ImageService(image, policy, workdir, env, **kwargs)
    try:
        service.start()
        yield service
    finally:
        service.remove()
