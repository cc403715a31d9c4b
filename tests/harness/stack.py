"""An in-process stack's parts: a static policy over five nodes, a KubeClient for the
loopback API server, and request bodies shaped as kube-scheduler sends them."""

from __future__ import annotations

from typing import Any

import kubernetes.client
import orjson
from starlette.testclient import TestClient

from extender.cluster.client import KubeClient
from extender.policy.settings import Settings
from tests.harness.kubeapi import FakeKubeAPI, client_for

NS = "decice"
SCHED = "decice_sched"
#: Node values of the static policy; node-5 is above the 0.9 filter threshold.
NODES = {"node-1": 0.35, "node-2": 0.70, "node-3": 0.10, "node-4": 0.15, "node-5": 0.95}
MAX_BODY = 1_000_000


def policy(**overrides: Any) -> dict[str, Any]:
    """The in-process policy: static values for node-1..node-5, bind on, 1 MB body limit."""
    raw: dict[str, Any] = {
        "schedulerNames": [SCHED],
        "server": {"maxBodyBytes": MAX_BODY, "gracePeriod": 5},
        "provider": "static",
        "static": {"nodes": {n: {"cpu": v} for n, v in NODES.items()}},
        "metrics": [{"name": "cpu", "filter": {"above": 0.9}, "maxAge": 3600}],
        "bind": {"enabled": True, "timeout": 0.5, "retries": 2},
        # Static values load at start-up; no later refresh replaces what a test installs.
        "prometheus": {"interval": 3600},
        # The fault tests script the API server's answers in request order (fail_next,
        # delay_next): an Event posted after a bind would take one of them. Events are
        # tested in tests/cluster/test_event_poster.py and under load in test_load.py.
        "explain": {"events": False},
    }
    raw.update(overrides)
    return raw


def kube_client(api: FakeKubeAPI | str, settings: Settings, token: str | None = None) -> KubeClient:
    """A KubeClient for the fake server (or a URL), with the policy's timeout and retries."""
    if isinstance(api, FakeKubeAPI):
        configuration = client_for(api, token=token).configuration
    else:
        configuration = kubernetes.client.Configuration(host=api)
    return KubeClient(
        configuration, timeout=settings.bind.timeout, retries=settings.bind.retries, backoff=0.05
    )


def extender_args(
    uid: str, name: str, nodes: list[str], scheduler: str = SCHED, namespace: str = NS
) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends them with nodeCacheCapable: true."""
    return {
        "Pod": {
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {
                "schedulerName": scheduler,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
            },
        },
        "Nodes": None,
        "NodeNames": nodes,
    }


def binding_args(uid: str, name: str, node: str, namespace: str = NS) -> dict[str, str]:
    return {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}


def post(client: TestClient, verb: str, body: Any) -> tuple[int, Any]:
    response = client.post(
        f"/{verb}", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    return response.status_code, orjson.loads(response.content)
