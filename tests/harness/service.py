"""Start the real service as a subprocess (`decice-extender serve`) on 127.0.0.1.

    with running_service(policy, tmp_path, env={"KUBECONFIG": str(kc)}) as svc:
        urllib.request.urlopen(svc.url + "/healthz")

The policy is written as JSON (valid YAML) to a temporary file; the port is a free
loopback port passed with --port. `start` waits for /healthz (bounded in time) and
`stop` sends SIGTERM and returns the exit code. stderr goes to a file the test reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.harness.loopback import LOCALHOST as LOCALHOST
from tests.harness.loopback import free_port

_PR_SET_PDEATHSIG = 1


# Looked up here, in the parent: the child between fork and exec only calls it.
_PRCTL: Callable[..., int] | None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _PRCTL = None


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """SIGKILL this child when the thread that started it exits (PR_SET_PDEATHSIG). Not
    SIGTERM: kube-apiserver's graceful shutdown never ends once etcd is gone as well."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def command() -> list[str]:
    """The console script next to this interpreter, else `python -m extender`."""
    script = Path(sys.executable).with_name("decice-extender")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "extender"]


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class _PortTaken(Exception):
    """The service could not bind its port: another socket took it after free_port()."""


class Service:
    def __init__(
        self,
        policy: Mapping[str, Any],
        workdir: Path,
        env: Mapping[str, str] | None = None,
        *,
        scheme: str = "http",
        client_ssl: ssl.SSLContext | None = None,
        log_level: str = "info",
        mode: str = "serve",
    ) -> None:
        """`mode`: "serve" (the extender), "rebalance" (the rebalancer, whose port serves
        /healthz, /readyz and /metrics) or "shadow" (those and /explain, /shadow)."""
        self.port = free_port()
        self.scheme = scheme
        self.client_ssl = client_ssl
        self.config = workdir / f"policy-{self.port}.yaml"
        self.config.write_text(json.dumps(policy, indent=2))
        self.stderr_path = workdir / f"service-{self.port}.stderr"
        self.env = dict(env or {})
        self.log_level = log_level
        self.mode = mode
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{LOCALHOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> Service:
        """Start the process and wait (at most `timeout` s) until /healthz answers 200.

        free_port() only says the port was free a moment ago: if another socket took it
        before the service bound it, the service is started again on another port."""
        for _ in range(3):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                self.port = free_port()
        raise AssertionError(f"service found its port taken 3 times:\n{self.stderr()}")

    def argv(self) -> list[str]:
        """The command line of the process (tests/harness/image.py runs it in the image)."""
        argv = [*command(), self.mode, "--config", str(self.config), "--port", str(self.port)]
        if self.mode in ("rebalance", "shadow"):
            argv += ["--host", LOCALHOST]
        return [*argv, "--log-level", self.log_level]

    def process_env(self) -> dict[str, str]:
        """The process's environment: this one's, without a cluster or Prometheus of its
        own, plus the service's `env`."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PROMETHEUS_URL")}
        env.update(self.env)
        return env

    def _start_once(self, timeout: float) -> Service:
        argv, env = self.argv(), self.process_env()
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent,  # only prctl(2): no locks, no imports
            )
        # A ceiling for a stuck start, not a measurement: a loaded 2-core machine needs
        # several seconds for the imports alone.
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "address already in use" in self.stderr().lower():
                    raise _PortTaken(self.port)
                raise AssertionError(
                    f"service exited with {self.proc.returncode} before healthy:\n{self.stderr()}"
                )
            try:
                status, _ = self.get("/healthz", timeout=1.0)
                if status == 200:
                    return self
                last = f"HTTP {status}"
            except OSError as exc:
                last = repr(exc)
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"service not healthy after {timeout}s ({last}):\n{self.stderr()}")

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        return self.request("GET", path, None, timeout=timeout)

    def post(self, path: str, body: Any, timeout: float = 10.0) -> tuple[int, bytes]:
        return self.request("POST", path, json.dumps(body).encode(), timeout=timeout)

    def request(
        self, method: str, path: str, data: bytes | None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.client_ssl) as resp:
                status: int = resp.status
                return status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, wait; kill on timeout. Returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.terminate()
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return self.proc.returncode


@contextlib.contextmanager
def running_service(
    policy: Mapping[str, Any],
    workdir: Path,
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Iterator[Service]:
    service = Service(policy, workdir, env, **kwargs)
    service.start()
    try:
        yield service
    finally:
        service.kill()
