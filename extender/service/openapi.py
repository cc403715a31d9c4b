"""An OpenAPI 3.0 description of our endpoints (served at /openapi.json for fuzzers and users).

Schemas follow k8s.io/kube-scheduler/extender/v1: Go field names, no json tags.
"""

from __future__ import annotations

from typing import Any

from extender.decisions.wire import VERBS, Verb
from extender.policy.settings import Settings

_STR = {"type": "string"}
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}, "nullable": True}
_POD = {
    "type": "object",
    "required": ["metadata"],
    "properties": {
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": _STR, "namespace": _STR, "uid": _STR},
        },
        "spec": {"type": "object", "properties": {"schedulerName": _STR}},
    },
}
_NODE_LIST = {
    "type": "object",
    "nullable": True,
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["metadata"],
                "properties": {
                    "metadata": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string", "minLength": 1}},
                    }
                },
            },
        }
    },
}
_META_VICTIMS = {
    "type": "object",
    "properties": {
        "Pods": {"type": "array", "items": {"type": "object", "properties": {"UID": _STR}}},
        "NumPDBViolations": {"type": "integer"},
    },
}
SCHEMAS: dict[str, Any] = {
    "ExtenderArgs": {
        "type": "object",
        "required": ["Pod"],
        "properties": {"Pod": _POD, "Nodes": _NODE_LIST, "NodeNames": _NAMES},
    },
    "ExtenderFilterResult": {
        "type": "object",
        "properties": {
            "Nodes": {"type": "object", "nullable": True},
            "NodeNames": _NAMES,
            "FailedNodes": {"type": "object", "additionalProperties": _STR},
            "FailedAndUnresolvableNodes": {"type": "object", "additionalProperties": _STR},
            "Error": _STR,
        },
    },
    "HostPriorityList": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["Host", "Score"],
            "properties": {"Host": _STR, "Score": {"type": "integer", "minimum": 0, "maximum": 10}},
        },
    },
    "ExtenderBindingArgs": {
        "type": "object",
        "required": ["PodName", "PodNamespace", "PodUID", "Node"],
        "properties": {k: _STR for k in ("PodName", "PodNamespace", "PodUID", "Node")},
    },
    "ExtenderBindingResult": {"type": "object", "properties": {"Error": _STR}},
    "ExtenderPreemptionArgs": {
        "type": "object",
        "required": ["Pod"],
        "properties": {
            "Pod": _POD,
            "NodeNameToVictims": {"type": "object", "nullable": True},
            "NodeNameToMetaVictims": {
                "type": "object",
                "nullable": True,
                "additionalProperties": _META_VICTIMS,
            },
        },
    },
    "ExtenderPreemptionResult": {
        "type": "object",
        "properties": {
            "NodeNameToMetaVictims": {"type": "object", "additionalProperties": _META_VICTIMS}
        },
    },
    "Error": {"type": "object", "properties": {"Error": _STR}},
}

_SCHEMAS_OF: dict[Verb, tuple[str, str]] = {
    "filter": ("ExtenderArgs", "ExtenderFilterResult"),
    "prioritize": ("ExtenderArgs", "HostPriorityList"),
    "bind": ("ExtenderBindingArgs", "ExtenderBindingResult"),
    "preempt": ("ExtenderPreemptionArgs", "ExtenderPreemptionResult"),
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": _ref(name)}}


def openapi_document(settings: Settings) -> dict[str, Any]:
    prefix = settings.server.url_prefix
    paths: dict[str, Any] = {}
    for verb in VERBS:
        request, response = _SCHEMAS_OF[verb]
        paths[f"{prefix}/{verb}"] = {
            "post": {
                "operationId": verb,
                "requestBody": {"required": True, "content": _json(request)},
                "responses": {
                    "200": {"description": "answer", "content": _json(response)},
                    "400": {"description": "bad request", "content": _json("Error")},
                    "413": {"description": "body too large", "content": _json("Error")},
                    "415": {"description": "not JSON", "content": _json("Error")},
                },
            }
        }
    for path, what in (("/healthz", "alive"), ("/readyz", "ready"), ("/metrics", "metrics")):
        paths[path] = {
            "get": {
                "responses": {"200": {"description": what}, "503": {"description": "not ready"}}
            }
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": "decice-extender", "version": "1.0"},
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
