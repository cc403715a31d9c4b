"""An OpenAPI 3.1 description of our endpoints (/openapi.json), its schemas made from the
types the verbs decode their requests with (extender.decisions.wiretypes).
"""

from __future__ import annotations

from typing import Any

import msgspec

from extender.decisions import wiretypes
from extender.decisions.wire import VERBS
from extender.policy.settings import Settings


def _schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    types = [wiretypes.REQUESTS[v] for v in VERBS] + [wiretypes.ANSWERS[v] for v in VERBS]
    types += [wiretypes.Error, *wiretypes.DOCUMENTED]
    refs, components = msgspec.json.schema_components(types, ref_template=wiretypes.SCHEMA_REF)
    n = len(VERBS)
    return (
        dict(zip(VERBS, refs[:n], strict=True)),
        dict(zip(VERBS, refs[n : 2 * n], strict=True)),
        components,
    )


REQUEST_SCHEMAS, ANSWER_SCHEMAS, SCHEMAS = _schemas()


def _ref(name: str) -> dict[str, str]:
    return {"$ref": wiretypes.SCHEMA_REF.format(name=name)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def openapi_document(settings: Settings) -> dict[str, Any]:
    prefix = settings.server.url_prefix
    paths: dict[str, Any] = {}
    error = _json(_ref("Error"))
    for verb in VERBS:
        paths[f"{prefix}/{verb}"] = {
            "post": {
                "operationId": verb,
                "requestBody": {"required": True, "content": _json(REQUEST_SCHEMAS[verb])},
                "responses": {
                    "200": {"description": "answer", "content": _json(ANSWER_SCHEMAS[verb])},
                    "400": {"description": "bad request", "content": error},
                    "413": {"description": "body too large", "content": error},
                    "415": {"description": "not JSON", "content": error},
                },
            }
        }
    for path, what in (
        ("/healthz", "alive"),
        ("/readyz", "ready: can answer"),
        ("/readyz/data", "every fail-closed metric has fresh data"),
        ("/metrics", "metrics"),
    ):
        paths[path] = {
            "get": {
                "responses": {"200": {"description": what}, "503": {"description": "not ready"}}
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "decice-extender", "version": "1.0"},
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
