"""In-process stacks for the reliability tests: extender.service.build_service with the
static policy below and a KubeClient talking to tests.kubeapi.FakeKubeAPI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import orjson
import pytest
from starlette.testclient import TestClient

from extender.config import Settings, parse_settings
from extender.kube import KubeClient
from extender.service import Service, build_service
from tests.integration.conftest import (  # noqa: F401 - real Prometheus fixtures, re-exported
    _shared_exporter,
    _shared_prometheus,
    exporter,
    prometheus,
)
from tests.kubeapi import FakeKubeAPI, client_for

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
        # tested in tests/test_events.py and under load in test_load.py.
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


@pytest.fixture
def kube_api() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI() as api:
        yield api
        api.release_delays()
        api.wait_idle(5)


@pytest.fixture
def settings() -> Settings:
    return parse_settings(policy())


@pytest.fixture
def stack(kube_api: FakeKubeAPI, settings: Settings) -> Service:
    return build_service(settings, kube=kube_client(kube_api, settings))


@pytest.fixture
def client(stack: Service) -> Iterator[TestClient]:
    with TestClient(stack.app) as c:
        yield c


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.reliability.counts import COUNTS

    if COUNTS:
        terminalreporter.section("reliability counts")
        for key in sorted(COUNTS):
            terminalreporter.write_line(f"{key}: {COUNTS[key]}")
