"""tests.harness.kubecalls: a fake's base fails every call the fake does not make itself."""

from __future__ import annotations

import pytest

from tests.harness.kubecalls import KubeCalls


async def test_every_call_a_fake_leaves_out_fails_naming_itself() -> None:
    kube = KubeCalls()
    with pytest.raises(AssertionError, match=r"unexpected Kubernetes call: POST .*/p1/binding"):
        await kube.bind("ns", "p1", "uid", "node-1")
    with pytest.raises(AssertionError, match="unexpected Kubernetes call: GET /api/v1/nodes"):
        await kube.list_nodes()
    with pytest.raises(AssertionError, match="unexpected Kubernetes watch: /api/v1/pods"):
        async for _ in kube.watch("/api/v1/pods", resource_version="1", timeout_seconds=1):
            pass
