"""`KubeCalls`: a KubeClient whose every request fails the test, naming it: the base of a
test's fake client. Each call is a module function over `request()` (or `stream()`, for a
watch), so a fake overrides the calls the code under test may make, and any other call
ends in one of these two, an AssertionError with the method and path."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import kubernetes.client

from extender.cluster.client import KubeClient


class KubeCalls(KubeClient):
    def __init__(self) -> None:
        # Never reached: every request stops in `request` or `stream` below.
        super().__init__(kubernetes.client.Configuration(host="http://127.0.0.1:9"), retries=0)

    async def request(self, method: str, path: str, *args: Any, **options: Any) -> Any:
        raise AssertionError(f"unexpected Kubernetes call: {method} {path}")

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *args: Any, **options: Any
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        raise AssertionError(f"unexpected Kubernetes watch: {path}")
        yield  # an async generator, as the transport's is
