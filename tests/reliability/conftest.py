"""Fixtures of in-process stacks for the reliability tests: build_service with the static
policy of tests.harness.stack and a KubeClient talking to tests.harness.kubeapi.FakeKubeAPI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from extender.policy.loading import parse_settings
from extender.policy.settings import Settings
from extender.service.compose import Service, build_service
from tests.harness.kubeapi import FakeKubeAPI
from tests.harness.stack import kube_client, policy


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
    from tests.harness.counts import COUNTS

    if COUNTS:
        terminalreporter.section("reliability counts")
        for key in sorted(COUNTS):
            terminalreporter.write_line(f"{key}: {COUNTS[key]}")
