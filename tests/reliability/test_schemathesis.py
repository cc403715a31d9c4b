"""Schemathesis against our own /openapi.json, in process (ASGI), offline: positive and
negative cases for every operation. The check is test_fuzz.check: no 5xx, and every 4xx
names the problem.

Schemathesis' own pytest plugin (`schemathesis.pytest.from_fixture`) fails on pytest 9
(`'Function' object has no attribute '_nodeid'`), so its strategies are drawn directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode

from extender.policy.loading import parse_settings
from extender.service.compose import build_service
from tests.harness.counts import COUNTS
from tests.harness.kubeapi import FakeKubeAPI
from tests.harness.stack import NS, kube_client, policy
from tests.reliability.test_fuzz import check


@pytest.fixture(scope="module")
def api_schema() -> Iterator[Any]:
    settings = parse_settings(policy())
    with FakeKubeAPI() as api:
        api.add_pod(NS, "with-requests", "9e764942-ad6e-420d-b0b4-8a8d15daa8fb")
        stack = build_service(settings, kube=kube_client(api, settings))
        yield schemathesis.openapi.from_asgi("/openapi.json", stack.app)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_openapi_operations(api_schema: Any, mode: GenerationMode, data: st.DataObject) -> None:
    case = data.draw(api_schema.as_strategy(generation_mode=mode))
    response = case.call()
    request = response.request.body or b""
    verb = case.path.rsplit("/", 1)[-1]
    what = f"schemathesis {mode.value}"
    if case.method.upper() == "GET":  # healthz, readyz, metrics: not JSON verbs
        COUNTS[f"fuzz cases ({what})"] += 1
        COUNTS["fuzz cases (total)"] += 1
        assert response.status_code in (200, 405), response.status_code
        return
    check(verb, response.status_code, response.content, what, request)
