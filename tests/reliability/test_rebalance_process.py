"""`decice-extender rebalance` as a real process against the loopback API server: it takes
the Lease, re-checks Krake's example in dry-run and then in evict mode, and a second
replica stays a standby. Waits are bounded polls of a condition.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.harness.kubeapi import FakeKubeAPI, write_kubeconfig
from tests.harness.loopback import free_port, wait_until_logged
from tests.harness.service import command

# Krake's example after the swap (tests/rebalancing/test_plan.py): a scores 1, b scores 5.
VALUES = {
    "a": {"electricity_cost": 0.1, "green_energy_ratio": 0.09},
    "b": {"electricity_cost": 0.01, "green_energy_ratio": 0.9},
}


def policy(mode: str) -> dict[str, Any]:
    return {
        "provider": "static",
        "static": {"nodes": VALUES},
        "metrics": [
            {"name": "electricity_cost", "direction": "higher"},
            {"name": "green_energy_ratio", "direction": "higher"},
        ],
        "bind": {"enabled": False},
        "prometheus": {"interval": 3600},
        "rebalance": {
            "mode": mode,
            "interval": 0.5,
            "sustain": 2,
            "margin": 3,  # a clearly better node moves a pod (the shipped 10: filtered only)
            "leaseNamespace": "decice-system",
            "leaseDuration": 4,
            "renewDeadline": 3,
            "retryPeriod": 1,
        },
    }


@contextmanager
def rebalancer(
    tmp_path: Path, api: FakeKubeAPI, mode: str, name: str
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    config = tmp_path / f"{name}.yaml"
    config.write_text(json.dumps(policy(mode)))
    assert api.token is not None
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, api.token)
    log = tmp_path / f"{name}.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PROMETHEUS_URL")}
    env.update(KUBECONFIG=str(kubeconfig), POD_NAME=name)
    argv = [*command(), "rebalance", "--config", str(config), "--host", "127.0.0.1"]
    argv += ["--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield proc, port, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def until(what: str, check: Callable[[], bool], log: Path, within: float = 30.0) -> None:
    wait_until_logged(check, within, what, lambda: log.read_text(errors="replace"))


def test_dry_run_then_evict_with_one_leader(tmp_path: Path) -> None:
    with FakeKubeAPI(token="rebalancer-token") as api:
        api.add_pod(
            "shop",
            "app",
            "uid-app",
            node_name="a",
            phase="Running",
            created=time.time() - 3600,
            owner=("ReplicaSet", "app-7d4"),
        )
        with rebalancer(tmp_path, api, "dry-run", "rebalancer-0") as (proc, _, log):
            until(
                "a would-move Event",
                lambda: any(e["reason"] == "WouldMove" for e in api.events),
                log,
            )
            lease = api.lease("decice-system", "decice-rebalancer")
            assert lease is not None and lease["spec"]["holderIdentity"] == "rebalancer-0"
            # Asked with dryRun: ["All"]: the API judged it, nothing changed.
            assert ("shop", "app", "uid-app") in api.dry_run_evictions
            assert api.eviction_count("shop", "app", dry_run=False) == 0
            text = log.read_text()
            assert (
                "rebalance (dry-run): would move shop/app on a (score 1), best b (score 5)" in text
            )
            assert "candidate 1/2 checks" in text  # sustain: the first check only waited
            assert proc.poll() is None
        api.delete_lease("decice-system", "decice-rebalancer")  # as a clean release would

        with (
            rebalancer(tmp_path, api, "evict", "rebalancer-1") as (_, _, log1),
            rebalancer(tmp_path, api, "evict", "rebalancer-2") as (_, _, log2),
        ):
            until(
                "one eviction", lambda: api.eviction_count("shop", "app", dry_run=False) == 1, log1
            )
            lease = api.lease("decice-system", "decice-rebalancer")
            assert lease is not None
            holder = lease["spec"]["holderIdentity"]
            assert holder in ("rebalancer-1", "rebalancer-2")
            leader_log, standby_log = (log1, log2) if holder == "rebalancer-1" else (log2, log1)
            until(
                "the Evicted Event",
                lambda: any(e["reason"] == "Evicted" for e in api.events),
                leader_log,
            )
            assert "rebalance: evicted shop/app on a (score 1)" in leader_log.read_text()
            assert "evicted" not in standby_log.read_text().replace("Evicted", "")
        assert api.eviction_count("shop", "app", dry_run=False) == 1
        assert set(api.evictions) == {("shop", "app", "uid-app")}  # UID-guarded, dry or not
