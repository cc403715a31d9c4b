"""Reading objects: one pod or node, pages of lists (pods, nodes, PodDisruptionBudgets)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from extender.cluster.client.api import Transport, non_empty
from extender.cluster.client.errors import KubeError
from extender.decisions.model import NodeInfo
from extender.decisions.nodes import node_info
from extender.decisions.pods import PodError, PodFacts, read_pod

_LIST_PAGE = 500
MAX_LIST_PAGES = 100  # list_pods gives up after this many pages by default


async def get_pod(api: Transport, namespace: str, name: str) -> PodFacts:
    """The pod, read as the filter path reads it; `KubeError` 404 when it is gone."""
    non_empty("get_pod", namespace=namespace, name=name)
    doc = await api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    try:
        return read_pod(doc)
    except PodError as exc:
        raise KubeError(
            f"unexpected pod {namespace}/{name}: {exc!r}", reason="BadResponse"
        ) from exc


async def get_node(api: Transport, name: str) -> dict[str, Any]:
    """The node as the API holds it (spec.taints, metadata.resourceVersion...)."""
    non_empty("get_node", name=name)
    doc = await api.request("GET", f"/api/v1/nodes/{name}")
    if not isinstance(doc, dict):
        raise KubeError(f"GET node {name}: answer is not an object", reason="BadResponse")
    return doc


async def list_page(
    api: Transport,
    path: str,
    *,
    limit: int,
    continue_token: str | None = None,
    field_selector: str = "",
) -> dict[str, Any]:
    """One page of a list, decoded as it came."""
    if limit < 1:
        raise ValueError("list_page: limit must be >= 1")
    params = {"limit": str(limit)}
    if continue_token:
        params["continue"] = continue_token
    if field_selector:
        params["fieldSelector"] = field_selector
    doc = await api.request("GET", path, params=params)
    if not isinstance(doc, dict):
        raise KubeError(f"GET {path}: answer is not a list", reason="BadResponse")
    return doc


def list_pods(
    api: Transport,
    field_selector: str = "",
    *,
    limit: int = _LIST_PAGE,
    max_pages: int = MAX_LIST_PAGES,
) -> AsyncIterator[dict[str, Any]]:
    """The pods matching `field_selector`, a page at a time (list_items)."""
    return list_items(
        api, "/api/v1/pods", "pods", field_selector=field_selector, limit=limit, max_pages=max_pages
    )


async def list_pdbs(
    api: Transport, *, limit: int = _LIST_PAGE, max_pages: int = MAX_LIST_PAGES
) -> list[dict[str, Any]]:
    """Every PodDisruptionBudget of every namespace (policy/v1, list-pdbs.json)."""
    path = "/apis/policy/v1/poddisruptionbudgets"
    return [
        item async for item in list_items(api, path, "budgets", limit=limit, max_pages=max_pages)
    ]


async def list_items(
    api: Transport,
    path: str,
    what: str,
    *,
    field_selector: str = "",
    limit: int = _LIST_PAGE,
    max_pages: int = MAX_LIST_PAGES,
) -> AsyncIterator[dict[str, Any]]:
    """The items at `path`, a page of `limit` in memory at a time, at most `max_pages`
    (else `KubeError` "TooManyPages"); a stale `continue` is a 410 `Expired`."""
    if max_pages < 1:
        raise ValueError("list_items: max_pages must be >= 1")
    token: str | None = None
    for _ in range(max_pages):
        doc = await list_page(
            api, path, limit=limit, continue_token=token, field_selector=field_selector
        )
        items = doc.get("items") or ()
        metadata = doc.get("metadata") or {}
        if not isinstance(items, list | tuple) or not isinstance(metadata, dict):
            raise KubeError(f"GET {path}: unexpected list", reason="BadResponse")
        for item in items:
            if isinstance(item, dict):
                yield item
        token = metadata.get("continue") or None
        if token is None:
            return
    raise KubeError(
        f"GET {path}: more than {max_pages} pages of {limit} {what}; gave up",
        reason="TooManyPages",
    )


async def list_nodes(api: Transport) -> tuple[list[NodeInfo], str]:
    """Every node, and the list's resourceVersion to watch from."""
    nodes: list[NodeInfo] = []
    version = ""
    token: str | None = None
    while True:
        doc = await list_page(api, "/api/v1/nodes", limit=_LIST_PAGE, continue_token=token)
        try:
            nodes.extend(node_info(item) for item in doc.get("items") or ())
            metadata = doc.get("metadata") or {}
            version = version or str(metadata.get("resourceVersion") or "")
            token = metadata.get("continue") or None
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise KubeError(f"unexpected node list: {exc!r}", reason="BadResponse") from exc
        if token is None:
            return nodes, version
