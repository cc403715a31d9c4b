"""Scheduler + extender pairs on the real control plane, as the chart's `ha-values.yaml`
runs them: each kube-scheduler with its own extender beside it (its `urlPrefix` points
there), every scheduler electing on the one Lease `decice_scheduler_config` prints.

    pair = Pair(control_plane, "a", policy, tmp_path, lease=SHORT_LEASE).start()
    pair.wait_leading(30)          # its scheduler took the Lease
    pair.kill()                    # SIGKILL both, as when their node dies
    pair.stop()                    # SIGTERM both (a rolling replacement), idempotent

`ControlPlane` runs one scheduler and one extender of its own; a pair's processes are
apart from those and stopped by their pids (`stop`, also after a test that failed).
Logs: `pair.scheduler_log` and `pair.extender.stderr_path`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.harness.controlplane import (
    EXTENDER_USER,
    SCHEDULER_USER,
    ControlPlane,
    ControlPlaneError,
    Process,
    feature_gates_flag,
    tail,
)
from tests.harness.loopback import LOCALHOST, free_port
from tests.harness.service import Service

SHORT_LEASE = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
"""Lease times for a test: a standby takes over about 4 s after the leader died (the
defaults, 15 s / 10 s / 2 s, would make every failover story 15 s longer)."""
ACQUIRED = "successfully acquired lease"
"""What kube-scheduler logs (any case) when it takes the Lease (client-go's leaderelection)."""


class Pair:
    def __init__(
        self,
        control_plane: ControlPlane,
        name: str,
        policy: Mapping[str, Any],
        workdir: Path,
        *,
        lease: Mapping[str, str] = SHORT_LEASE,
        kubeconfig: Path | None = None,
    ) -> None:
        """`kubeconfig`: the extender's (default: the user decice-extender's, straight to
        the API server; `ControlPlane.api_gate` gives one through a gate)."""
        self.control_plane = control_plane
        self.name = name
        self.workdir = workdir / f"pair-{name}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extender = Service(
            dict(policy),
            self.workdir,
            {"KUBECONFIG": str(kubeconfig or control_plane.kubeconfig(EXTENDER_USER))},
        )
        self.lease = dict(lease)
        self.scheduler: Process | None = None
        self.scheduler_log = self.workdir / "kube-scheduler.log"
        self.port = 0

    def start(self, timeout: float = 60.0) -> Pair:
        """The extender until its watches listed, then its scheduler until /readyz."""
        self.extender.start(timeout)
        return self.start_scheduler(timeout)

    def start_scheduler(self, timeout: float = 60.0) -> Pair:
        """Its scheduler until /readyz, once its extender (started) has listed."""
        self.control_plane.wait_extender_synced(self.extender, timeout)
        cp = self.control_plane
        config = cp.decice_scheduler_config(
            self.extender.config, self.extender.port, env=self.extender.env
        )
        config["leaderElection"].update(self.lease)
        config.setdefault("clientConnection", {})["kubeconfig"] = str(cp.kubeconfig(SCHEDULER_USER))
        path = self.workdir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        assert cp.binaries is not None
        kubeconfig = str(cp.kubeconfig(SCHEDULER_USER))
        for _ in range(3):  # free_port() only says a port was free a moment ago
            self.port = free_port()
            argv = [
                str(cp.binaries.scheduler),
                f"--config={path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOCALHOST}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.workdir / 'certs'}",
                "--v=2",
                *feature_gates_flag(cp.scheduler_feature_gates),
            ]
            self.scheduler = Process(f"kube-scheduler-{self.name}", argv, self.scheduler_log)
            self.scheduler.start()
            try:
                self.scheduler.wait_ready(self._ready, timeout, "kube-scheduler answers /readyz")
                return self
            except ControlPlaneError:
                self.scheduler.stop()
                if not self.scheduler.port_taken():
                    raise
        raise ControlPlaneError(f"pair {self.name}: its scheduler's port was taken 3 times")

    def _ready(self) -> bool:
        try:
            url = f"https://{LOCALHOST}:{self.port}/readyz"
            return httpx.get(url, verify=False, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def leading(self) -> bool:
        """Its scheduler logged taking the Lease (in this start's log)."""
        return ACQUIRED in self.scheduler_log.read_text(errors="replace").lower()

    def wait_leading(self, timeout: float) -> None:
        assert self.scheduler is not None
        self.scheduler.wait_ready(self.leading, timeout, f"pair {self.name} holds the Lease")

    def kill(self) -> None:
        """SIGKILL the scheduler and the extender together (their node died)."""
        assert self.scheduler is not None and self.scheduler.pid is not None
        os.kill(self.scheduler.pid, signal.SIGKILL)
        os.kill(self.extender.pid, signal.SIGKILL)
        self.scheduler.stop()  # reaps it
        self.extender.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM both at once, as Kubernetes stops a pod's containers (a rolling
        replacement); the scheduler releases its Lease, the extender drains its binds.
        Idempotent."""
        if self.extender.proc is not None and self.extender.alive():
            self.extender.terminate()
        if self.scheduler is not None:
            self.scheduler.stop(timeout)
        if self.extender.proc is not None and self.extender.alive():
            self.extender.stop(timeout)

    def describe(self) -> str:
        return (
            f"pair {self.name}: scheduler log {self.scheduler_log}:\n{tail(self.scheduler_log)}\n"
            f"extender log {self.extender.stderr_path}:\n{tail(self.extender.stderr_path)}"
        )
