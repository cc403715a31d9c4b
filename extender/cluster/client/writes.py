"""The calls that write (Binding, Eviction, annotations, taints, Events, and doctor's
SelfSubjectAccessReview), each with the object's UID or resourceVersion as precondition."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from extender.cluster.client.api import Transport, non_empty
from extender.cluster.client.errors import (
    KubeAlreadyBound,
    KubeError,
    KubeEvictionRefused,
    clean_message,
)
from extender.decisions.model import PodEvent

REPORTING_CONTROLLER = "decice.io/extender"


async def bind(api: Transport, namespace: str, name: str, uid: str, node: str) -> str:
    """Bind pod `namespace/name` to `node` (v1 `Binding`, `uid` the precondition): "bound",
    or "already-bound". `KubeAlreadyBound` when on another node; 409 for another UID."""
    non_empty("bind", namespace=namespace, name=name, node=node)
    metadata = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
    try:
        await api.request("POST", path, body=orjson.dumps(body))
    except KubeAlreadyBound as err:
        # A repeated bind answers 409 even for the same node: a retry after a lost answer.
        if err.node == node:
            return "already-bound"
        raise
    return "bound"


async def evict(
    api: Transport, namespace: str, name: str, uid: str, *, dry_run: bool = False
) -> None:
    """Evict pod `namespace/name` (policy/v1 `Eviction`, `uid` the precondition; `dry_run`:
    checked, nothing changed). A 429 raises `KubeEvictionRefused`, not retried; 5xx and
    timeouts are (a repeated eviction of a terminating pod is accepted again)."""
    non_empty("evict", namespace=namespace, name=name)
    options: dict[str, Any] = {}
    if dry_run:
        options["dryRun"] = ["All"]
    if uid:
        options["preconditions"] = {"uid": uid}
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        **({"deleteOptions": options} if options else {}),
    }
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    try:
        await api.request("POST", path, body=orjson.dumps(doc), final=(429,))
    except KubeError as err:
        if err.status == 429:
            raise KubeEvictionRefused.from_error(err) from err
        raise


async def annotate_pod(
    api: Transport, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
) -> None:
    """Set (None: remove) a pod's annotations by merge patch, `uid` the precondition (422)."""
    non_empty("annotate_pod", namespace=namespace, name=name)
    metadata: dict[str, Any] = {**({"uid": uid} if uid else {}), "annotations": dict(annotations)}
    await api.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        body=orjson.dumps({"metadata": metadata}),
        content_type="application/merge-patch+json",
    )


async def set_node_taints(
    api: Transport, name: str, resource_version: str, taints: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Replace the node's spec.taints if still at `resource_version` (a JSON patch `test`;
    else 422 `Invalid`, patch-node-taint-stale.json): the node as the API answers it."""
    non_empty("set_node_taints", name=name, resource_version=resource_version)
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": "/spec/taints", "value": [dict(t) for t in taints]},
    ]
    doc: dict[str, Any] = await api.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body=orjson.dumps(patch),
        content_type="application/json-patch+json",
    )
    return doc


async def create_event(api: Transport, event: PodEvent) -> None:
    """POST an events.k8s.io/v1 Event about a pod or a node, once (best-effort)."""
    stamp = datetime.datetime.fromtimestamp(event.time, tz=datetime.UTC)
    where = {"namespace": event.namespace} if event.kind == "Pod" else {}
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # generateName must be a DNS subdomain prefix: "<pod>-", never "<pod>."
        "metadata": {"generateName": f"{event.name[:200]}-", "namespace": event.namespace},
        "eventTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),  # a MicroTime
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": event.instance[:128],
        "action": event.action,
        "reason": event.reason,
        "regarding": {
            "apiVersion": "v1",
            "kind": event.kind,
            **where,
            "name": event.name,
            "uid": event.uid,
        },
        "note": event.note[:1024],
        "type": event.type,
    }
    path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events"
    await api.request("POST", path, body=orjson.dumps(body), retries=0)


async def access_review(
    api: Transport,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "",
) -> tuple[bool, str]:
    """May we `verb` `resource` (SelfSubjectAccessReview)? (allowed, the authorizer's reason
    or evaluationError); an empty `namespace` asks about the cluster scope."""
    non_empty("access_review", verb=verb, resource=resource)
    attributes = {
        **({"namespace": namespace} if namespace else {}),
        "verb": verb,
        "group": group,
        "resource": resource,
        **({"subresource": subresource} if subresource else {}),
    }
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    doc = await api.request("POST", path, body=orjson.dumps(body))
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("allowed"), bool):
        raise KubeError(
            "SelfSubjectAccessReview: answer without status.allowed", reason="BadResponse"
        )
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return bool(status["allowed"]), clean_message(reason)
