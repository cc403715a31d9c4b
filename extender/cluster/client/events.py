"""Posting events.k8s.io/v1 Events (best-effort: sent once, never retried)."""

from __future__ import annotations

import datetime

import orjson

from extender.cluster.client.api import Transport
from extender.decisions.model import PodEvent

REPORTING_CONTROLLER = "decice.io/extender"


def _micro_time(seconds: float) -> str:
    """A MicroTime as the API server writes it: 2026-11-23T13:26:23.000000Z."""
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def create_event(api: Transport, event: PodEvent) -> None:
    """POST an events.k8s.io/v1 Event about a pod or a node (once: events are
    best-effort)."""
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # generateName must be a DNS subdomain prefix: "<pod>-", never "<pod>."
        "metadata": {"generateName": f"{event.name[:200]}-", "namespace": event.namespace},
        "eventTime": _micro_time(event.time),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": event.instance[:128],
        "action": event.action,
        "reason": event.reason,
        "regarding": _regarding(event),
        "note": event.note[:1024],
        "type": event.type,
    }
    path = f"/apis/events.k8s.io/v1/namespaces/{event.namespace}/events"
    await api.request("POST", path, body=orjson.dumps(body), retries=0)


def _regarding(event: PodEvent) -> dict[str, str]:
    """The object an Event is about: a pod in its namespace, or a (cluster-scoped) node."""
    where = {"namespace": event.namespace} if event.kind == "Pod" else {}
    return {"apiVersion": "v1", "kind": event.kind, **where, "name": event.name, "uid": event.uid}
