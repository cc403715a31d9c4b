"""The Kubernetes calls the service makes, as one interface (client.KubeClient makes them;
tests give a fake). Importing this module imports no HTTP client.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from extender.decisions.model import NodeInfo, PodEvent
from extender.decisions.pods import PodFacts


class KubeAPI(Protocol):
    """Each call raises `KubeError` (extender.cluster.client.errors) on failure."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> str: ...

    async def get_pod(self, namespace: str, name: str) -> PodFacts: ...

    async def get_node(self, name: str) -> dict[str, Any]: ...

    async def list_nodes(self) -> tuple[list[NodeInfo], str]: ...

    async def list_page(
        self,
        path: str,
        *,
        limit: int,
        continue_token: str | None = None,
        field_selector: str = "",
    ) -> dict[str, Any]: ...

    def list_pods(
        self,
        field_selector: str = "",
        *,
        namespace: str | None = None,
        limit: int = ...,
        max_pages: int = ...,
    ) -> AsyncIterator[dict[str, Any]]: ...

    async def list_pdbs(
        self, *, limit: int = ..., max_pages: int = ...
    ) -> list[dict[str, Any]]: ...

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
    ) -> None: ...

    async def set_node_taints(
        self, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]: ...

    async def create_event(self, event: PodEvent) -> None: ...

    async def evict(
        self, namespace: str, name: str, uid: str, *, dry_run: bool = False
    ) -> None: ...

    async def access_review(
        self,
        verb: str,
        resource: str,
        *,
        group: str = "",
        subresource: str = "",
        namespace: str = "",
    ) -> tuple[bool, str]: ...

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        bookmarks: bool = True,
        opened: Callable[[], None] | None = None,
        sieve: Callable[[bytearray], bool] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]: ...

    async def close(self) -> None:
        """Close the connections; a later call opens new ones."""
