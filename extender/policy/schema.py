"""The JSON schema of the policy format: pydantic's, from the models (descriptions are the
fields' attribute docstrings), inlined and simplified for people and for the chart."""

from __future__ import annotations

from typing import Any

from extender.policy.settings import Settings

Schema = dict[str, Any]

CHART_OWNED: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("schedulerNames",),
    ("server",): ("host", "port", "metricsHost", "metricsPort", "tls"),
}
"""Keys the chart writes into the policy itself (templates/_helpers.tpl,
decice-extender.policy): under `values.policy` they are schema errors."""

POLICY_DESCRIPTION = (
    "The extender policy (docs/configuration.md) without schedulerNames, server.host and "
    "server.port, which the chart sets"
)
SERVER_DESCRIPTION = (
    "host, port, metricsHost, metricsPort and tls are set by the chart (extender.listenAddress, "
    "extender.port, extender.metricsPort, extender.tls)"
)

_SUBSCHEMA_MAPS = ("properties", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "propertyNames", "not")


def settings_schema() -> Schema:
    """The whole policy file's schema, simplified (see `_simplified`)."""
    raw = Settings.model_json_schema(by_alias=True, mode="validation")
    return _simplified(raw, raw.pop("$defs", {}))


def policy_schema() -> Schema:
    """The schema of the chart's `values.policy`: the policy without the chart's own keys."""
    schema = settings_schema()
    for path, keys in CHART_OWNED.items():
        node = schema
        for key in path:
            node = node["properties"][key]
        for key in keys:
            del node["properties"][key]
        if "required" in node:
            node["required"] = [k for k in node["required"] if k not in keys]
    schema["properties"]["server"]["description"] = SERVER_DESCRIPTION
    schema["description"] = POLICY_DESCRIPTION
    return schema


def _simplified(node: Schema, defs: dict[str, Schema]) -> Schema:
    """One schema node cleaned for Helm and readers, recursively: each `$ref` inlined (pydantic
    cannot: pydantic/pydantic#12023) under the field's own description and default, no titles,
    no object defaults (each key has its own), `anyOf: [X, null]` as `type: [X, "null"]`, and
    `patternProperties` as `propertyNames` (so a key that breaks the pattern is rejected)."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        node = {**defs[ref.removeprefix("#/$defs/")], **node}
        del node["$ref"]
    out: Schema = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key in _SUBSCHEMA_MAPS:
            out[key] = {k: _simplified(v, defs) for k, v in value.items()}
        elif key in _SUBSCHEMA_LISTS:
            out[key] = [_simplified(v, defs) for v in value]
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict):
            out[key] = _simplified(value, defs)
        elif key == "description":
            out[key] = " ".join(str(value).split())
        elif key == "default" and (  # an object, or a list of objects: each key has its own
            bool(value)
            if isinstance(value, dict)
            else isinstance(value, list) and any(isinstance(v, dict) for v in value)
        ):
            continue
        else:
            out[key] = value
    out = _nullable(out)
    first = [k for k in ("type", "description", "default", "enum") if k in out]  # reading order
    out = {k: out[k] for k in [*first, *(k for k in out if k not in first)]}
    patterns = out.get("patternProperties")
    if (
        isinstance(patterns, dict)
        and len(patterns) == 1
        and "properties" not in out
        and "additionalProperties" not in out
    ):
        ((pattern, value_schema),) = patterns.items()
        del out["patternProperties"]
        names: Schema = dict(out.get("propertyNames", {}))
        out["propertyNames"] = {"pattern": pattern, **names}
        out["additionalProperties"] = value_schema
    return out


def _nullable(node: Schema) -> Schema:
    options = node.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return node
    (other,) = [o for o in options if o != {"type": "null"}]
    kind = other.get("type")
    if not isinstance(kind, str) or "anyOf" in other or "const" in other:
        return node
    merged: Schema = {k: v for k, v in node.items() if k != "anyOf"}
    for key, value in other.items():
        merged.setdefault(key, value)
    merged["type"] = [kind, "null"]
    if "enum" in merged:
        merged["enum"] = [*merged["enum"], None]
    return merged
