"""Binding a pod to a node (v1 `Binding`), with its UID as the precondition."""

from __future__ import annotations

import orjson

from extender.cluster.client.api import Transport
from extender.cluster.client.errors import KubeAlreadyBound

BIND_BOUND = "bound"
BIND_ALREADY_BOUND = "already-bound"


async def bind(api: Transport, namespace: str, name: str, uid: str, node: str) -> str:
    """Bind pod `namespace/name` to `node`: "bound", or "already-bound" if it is there.

    `uid` is sent as the precondition, so a pod deleted and recreated under the same
    name is not bound by mistake; an empty `uid` sends no precondition. Raises
    `KubeAlreadyBound` when the pod sits on another node, `KubeError` 409 when the
    UID does not match, 404 when the pod is gone.
    """
    for arg, value in (("namespace", namespace), ("name", name), ("node", node)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"bind: {arg} must be a non-empty string, got {value!r}")
    try:
        await api.request(
            "POST",
            binding_path(namespace, name),
            body=binding_body(namespace, name, uid, node),
        )
    except KubeAlreadyBound as err:
        # The API answers a repeated bind with 409 even for the same node; a retry
        # after a lost answer lands here, and it is a success.
        if err.node == node:
            return BIND_ALREADY_BOUND
        raise
    return BIND_BOUND


def binding_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}/binding"


def binding_body(namespace: str, name: str, uid: str, node: str) -> bytes:
    """A v1 `Binding` of pod `namespace/name` to `node`, `uid` its precondition (none
    when empty)."""
    metadata = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
    )
