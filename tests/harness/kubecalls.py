"""`KubeCalls`: extender.cluster.kubeapi.KubeAPI with every call failing the test, the base
of a test's fake client: the fake overrides the calls the code under test may make, and any
other call is a failure naming itself."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, NoReturn

from extender.decisions.model import NodeInfo, PodEvent
from extender.decisions.pods import PodFacts


def _unexpected(call: str) -> NoReturn:
    raise AssertionError(f"unexpected Kubernetes call: {call}")


class KubeCalls:
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        _unexpected("bind")

    async def get_pod(self, namespace: str, name: str) -> PodFacts:
        _unexpected("get_pod")

    async def get_node(self, name: str) -> dict[str, Any]:
        _unexpected("get_node")

    async def list_nodes(self) -> tuple[list[NodeInfo], str]:
        _unexpected("list_nodes")

    async def list_page(
        self,
        path: str,
        *,
        limit: int,
        continue_token: str | None = None,
        field_selector: str = "",
    ) -> dict[str, Any]:
        _unexpected("list_page")

    def list_pods(
        self,
        field_selector: str = "",
        *,
        namespace: str | None = None,
        limit: int = 500,
        max_pages: int = 100,
    ) -> AsyncIterator[dict[str, Any]]:
        _unexpected("list_pods")

    async def list_pdbs(self, *, limit: int = 500, max_pages: int = 100) -> list[dict[str, Any]]:
        _unexpected("list_pdbs")

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
    ) -> None:
        _unexpected("annotate_pod")

    async def set_node_taints(
        self, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        _unexpected("set_node_taints")

    async def create_event(self, event: PodEvent) -> None:
        _unexpected("create_event")

    async def evict(self, namespace: str, name: str, uid: str, *, dry_run: bool = False) -> None:
        _unexpected("evict")

    async def access_review(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str = "",
    ) -> tuple[bool, str]:
        _unexpected("access_review")

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        bookmarks: bool = True,
        opened: Callable[[], None] | None = None,
        sieve: Callable[[bytearray], bool] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        _unexpected("watch")

    async def close(self) -> None:
        """Nothing to close."""
