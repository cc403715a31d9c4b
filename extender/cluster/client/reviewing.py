"""Asking the API what we may do (SelfSubjectAccessReview), for `doctor`."""

from __future__ import annotations

import orjson

from extender.cluster.client.api import Transport
from extender.cluster.client.errors import KubeError, clean_message


async def access_review(
    api: Transport,
    verb: str,
    resource: str,
    *,
    group: str = "",
    subresource: str = "",
    namespace: str = "",
) -> tuple[bool, str]:
    """May we `verb` `resource` (in `group`, its `subresource`)? A SelfSubjectAccessReview
    (fixture selfsubjectaccessreview.json): `(allowed, reason)`, the reason as the
    authorizer gave it (RBAC leaves it empty on a denial), or its evaluationError. An
    empty `namespace` asks about every namespace (the cluster scope)."""
    if not verb or not resource:
        raise ValueError("access_review: verb and resource must be non-empty")
    attributes: dict[str, str] = {}
    if namespace:
        attributes["namespace"] = namespace
    attributes.update(verb=verb, group=group, resource=resource)
    if subresource:
        attributes["subresource"] = subresource
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    doc = await api.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body=orjson.dumps(body),
    )
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(status, dict) or not isinstance(status.get("allowed"), bool):
        raise KubeError(
            "SelfSubjectAccessReview: answer without status.allowed", reason="BadResponse"
        )
    reason = str(status.get("reason") or status.get("evaluationError") or "")
    return bool(status["allowed"]), clean_message(reason)
