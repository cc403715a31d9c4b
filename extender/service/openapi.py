"""An OpenAPI 3.1 description of our endpoints (/openapi.json), its schemas made from the
types the verbs decode their requests with (extender.decisions.wiretypes).
"""

from __future__ import annotations

from typing import Any

import msgspec

from extender.decisions import wiretypes
from extender.decisions.wire import VERBS
from extender.policy.settings import Settings

_VERB_TYPES = [*map(wiretypes.REQUESTS.get, VERBS), *map(wiretypes.ANSWERS.get, VERBS)]
# _REFS: the verbs' requests, then their answers, then the error and the documented parts.
_REFS, SCHEMAS = msgspec.json.schema_components(
    [*_VERB_TYPES, wiretypes.Error, *wiretypes.DOCUMENTED], ref_template=wiretypes.SCHEMA_REF
)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def openapi_document(settings: Settings) -> dict[str, Any]:
    prefix = settings.server.url_prefix
    paths: dict[str, Any] = {}
    error = _json({"$ref": wiretypes.SCHEMA_REF.format(name="Error")})
    for i, verb in enumerate(VERBS):
        request, answer = _REFS[i], _REFS[len(VERBS) + i]
        paths[f"{prefix}/{verb}"] = {
            "post": {
                "operationId": verb,
                "requestBody": {"required": True, "content": _json(request)},
                "responses": {
                    "200": {"description": "answer", "content": _json(answer)},
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
