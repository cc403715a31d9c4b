"""Patching objects: a pod's annotations (JSON merge patch, UID-guarded) and a node's
taints (JSON patch, guarded by its resourceVersion)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from extender.cluster.client.api import Transport

_MERGE_PATCH = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


async def annotate_pod(
    api: Transport, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
) -> None:
    """Set (or, for None, remove) annotations of a pod with a JSON merge patch.

    `uid` rides in the patch as a precondition: the API answers 422 `Invalid` ("field
    is immutable") when the pod was re-created under the name, 404 when it is gone. An
    empty `uid` sends no precondition. Retried on transient failures (idempotent).
    """
    if not namespace or not name:
        raise ValueError("annotate_pod: namespace and name must be non-empty")
    metadata: dict[str, Any] = {"annotations": dict(annotations)}
    if uid:
        metadata = {"uid": uid, **metadata}
    await api.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        body=orjson.dumps({"metadata": metadata}),
        content_type=_MERGE_PATCH,
    )


async def set_node_taints(
    api: Transport, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Replace the node's spec.taints with `taints`, only if the node is still at
    `resource_version` (a JSON patch with a `test` op, patch-node-taint-ok.json): the
    node as the API answers it. A node changed meanwhile answers 422 `Invalid`
    (patch-node-taint-stale.json): read it again and retry. Not retried here on 422;
    transient failures are (a failed test changes nothing, so a retry is safe)."""
    if not name or not resource_version:
        raise ValueError("set_node_taints: name and resource_version must be non-empty")
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": "/spec/taints", "value": [dict(t) for t in taints]},
    ]
    doc: dict[str, Any] = await api.request(
        "PATCH", f"/api/v1/nodes/{name}", body=orjson.dumps(patch), content_type=_JSON_PATCH
    )
    return doc
