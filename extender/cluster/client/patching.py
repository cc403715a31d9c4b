"""Patching pods: annotations set or removed with a JSON merge patch, UID-guarded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from extender.cluster.client.api import KubeTransport

_MERGE_PATCH = "application/merge-patch+json"


class Patching(KubeTransport):
    """Pod patches."""

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, annotations: Mapping[str, str | None]
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
        await self._request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            body=orjson.dumps({"metadata": metadata}),
            content_type=_MERGE_PATCH,
        )
