"""Evicting pods through the Eviction API (policy/v1 `Eviction`), UID-guarded.

A refusal by a PodDisruptionBudget (429) is never retried here: the caller decides when
to ask again.
"""

from __future__ import annotations

from typing import Any

import orjson

from extender.cluster.client.api import Transport
from extender.cluster.client.errors import KubeError, KubeEvictionRefused


async def evict(
    api: Transport, namespace: str, name: str, uid: str, *, dry_run: bool = False
) -> None:
    """Evict pod `namespace/name` through the Eviction API (policy/v1 `Eviction`), with
    `uid` as the delete precondition, so a pod re-created under the name is left alone
    (an empty `uid` sends none).

    `dry_run`: `deleteOptions.dryRun: ["All"]`: the server checks everything a real
    eviction would (the pod, its PodDisruptionBudgets, the UID) and changes nothing
    (evict-dryrun-*.json), so a dry run reports what would really happen.

    Success means the API accepted it: the pod is terminating (it keeps running until
    its kubelet stops it), or is gone at once if it was Pending. Raises
    `KubeEvictionRefused` (429) when a PodDisruptionBudget refuses, never retried here;
    `KubeError` 404 when the pod is gone, 409 `Conflict` when its UID differs, 400
    `BadRequest` for a body the API rejects. Timeouts, connection errors and 5xx are
    retried (a repeated eviction of a terminating pod is accepted again).
    """
    for arg, value in (("namespace", namespace), ("name", name)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"evict: {arg} must be a non-empty string, got {value!r}")
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    options: dict[str, Any] = {}
    if dry_run:
        options["dryRun"] = ["All"]
    if uid:
        options["preconditions"] = {"uid": uid}
    if options:
        doc["deleteOptions"] = options
    try:
        await api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            body=orjson.dumps(doc),
            final=(429,),
        )
    except KubeError as err:
        if err.status == 429:
            raise KubeEvictionRefused.from_error(err) from err
        raise
