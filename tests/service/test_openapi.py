"""/openapi.json says what the parsers do (both come from decisions.wiretypes): the captured
scheduler bodies validate against its request schemas and the captured answers against its
answer schemas; bodies the parsers refuse, the document refuses (JSON Schema 2020-12, as
OpenAPI 3.1 uses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import orjson
import pytest

from extender.decisions.wire import (
    VERBS,
    WireError,
    parse_binding_args,
    parse_extender_args,
    parse_preemption_args,
)
from extender.service.openapi import openapi_document
from tests.harness.fixtures import SCHEDULER, fixture_json, make_settings

DOC = openapi_document(make_settings())
PARSERS: dict[str, Callable[[bytes], object]] = {
    "filter": parse_extender_args,
    "prioritize": parse_extender_args,
    "bind": parse_binding_args,
    "preempt": parse_preemption_args,
}


def validator(verb: str, part: str) -> jsonschema.Draft202012Validator:
    """The schema of a verb's request body ("request") or 200 answer ("answer")."""
    post = DOC["paths"][f"/{verb}"]["post"]
    if part == "request":
        schema = post["requestBody"]["content"]["application/json"]["schema"]
    else:
        schema = post["responses"]["200"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": DOC["components"]})


def valid(verb: str, part: str, doc: Any) -> bool:
    return bool(validator(verb, part).is_valid(doc))


def test_the_document_is_openapi_3_1_with_every_verb() -> None:
    assert DOC["openapi"] == "3.1.0"
    assert set(DOC["paths"]) >= {f"/{v}" for v in VERBS}
    for schema in DOC["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)  # raises when malformed


def test_captured_requests_and_answers_fit_the_document() -> None:
    requests = [p.name for p in SCHEDULER.glob("*.json") if not p.name.endswith(".response.json")]
    for name in requests:
        verb = name.split("-")[0].removesuffix(".json")
        assert valid(verb, "request", fixture_json(name)), name
        answer = SCHEDULER / name.replace(".json", ".response.json")
        if answer.exists():
            assert valid(verb, "answer", orjson.loads(answer.read_bytes())), answer.name


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        ("filter", {"Pod": {"metadata": {"name": "p"}}, "NodeNames": []}),
        ("filter", {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a", ""]}),
        ("filter", {"Pod": {"metadata": {}}, "NodeNames": ["a"]}),
        ("filter", {"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{}]}}),
        ("bind", {"PodName": "p", "PodNamespace": "n", "PodUID": "u", "Node": ""}),
        ("preempt", {"Pod": {"metadata": {"name": "p"}}, "NodeNameToVictims": {"n": 5}}),
    ],
)
def test_bodies_the_parsers_refuse_the_document_refuses(verb: str, body: Any) -> None:
    with pytest.raises(WireError):
        PARSERS[verb](orjson.dumps(body))
    assert not valid(verb, "request", body)
