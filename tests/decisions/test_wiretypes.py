"""The wire parsers (extender.decisions.wire) accept exactly the bodies the typed
description (extender.decisions.wiretypes) accepts, so the OpenAPI document made from the
description says what the service does: every captured scheduler body, then mutations of
them, random JSON and node names of any kind, each put to both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
import msgspec
import orjson
import pytest
from hypothesis import strategies as st

from extender.decisions import wiretypes
from extender.decisions.wire import (
    WireError,
    parse_binding_args,
    parse_extender_args,
    parse_preemption_args,
)
from tests.harness.fixtures import SCHEDULER, fixture_bytes
from tests.reliability.test_fuzz import json_values, mutated, odd_text

VERBS = ("filter", "prioritize", "bind", "preempt")
PARSERS: dict[str, Callable[[bytes], object]] = {
    "filter": parse_extender_args,
    "prioritize": parse_extender_args,
    "bind": parse_binding_args,
    "preempt": parse_preemption_args,
}
CHECKS = hypothesis.settings(max_examples=300, deadline=None, database=None)


def parser_takes(verb: str, body: bytes) -> bool:
    try:
        PARSERS[verb](body)
    except WireError:
        return False
    return True


def description_takes(verb: str, body: bytes) -> bool:
    try:
        msgspec.json.decode(body, type=wiretypes.REQUESTS[verb])
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return False
    return True


def agree(verb: str, body: bytes) -> None:
    parser, description = parser_takes(verb, body), description_takes(verb, body)
    assert parser == description, (
        f"{verb}: the parser {'takes' if parser else 'refuses'} and the description "
        f"{'takes' if description else 'refuses'} {body[:400]!r}"
    )


def test_every_captured_request_is_taken_by_both() -> None:
    requests = [p.name for p in SCHEDULER.glob("*.json") if not p.name.endswith(".response.json")]
    assert requests
    for name in requests:
        verb = name.split("-")[0].removesuffix(".json")
        body = fixture_bytes(name)
        assert parser_takes(verb, body) and description_takes(verb, body), name


@pytest.mark.parametrize("verb", VERBS)
@CHECKS
@hypothesis.given(data=st.data())
def test_mutated_bodies_are_judged_alike(verb: str, data: st.DataObject) -> None:
    agree(verb, orjson.dumps(data.draw(mutated(verb))))


@pytest.mark.parametrize("verb", VERBS)
@CHECKS
@hypothesis.given(value=json_values)
def test_random_json_is_judged_alike(verb: str, value: Any) -> None:
    agree(verb, orjson.dumps(value))


@CHECKS
@hypothesis.given(names=st.lists(st.one_of(odd_text, json_values), max_size=12))
def test_node_names_of_any_kind_are_judged_alike(names: list[Any]) -> None:
    pod = {"metadata": {"name": "p"}}
    agree("filter", orjson.dumps({"Pod": pod, "NodeNames": names}))
    items = [{"metadata": {"name": n}} for n in names]
    agree("filter", orjson.dumps({"Pod": pod, "Nodes": {"items": items}}))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b'{"Pod": {"metadata": {"name": "\\ud800"}}, "NodeNames": ["a"]}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1e999]}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a"], "Nodes": {"items": []}}',
        b'{"Pod": {"metadata": {"name": "p"}, "spec": []}, "NodeNames": ["a"]}',
        b'{"Pod": {"metadata": {"name": "p"}, "spec": null}, "NodeNames": ["a"]}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a"]}',
    ],
)
def test_edge_bodies_are_judged_alike(body: bytes) -> None:
    agree("filter", body)


POD = b'"Pod": {"metadata": {"name": "p"}}'


@pytest.mark.parametrize(
    "victims",
    [
        b'"NodeNameToVictims": {"n": 5}',
        b'"NodeNameToVictims": {"n": {"Pods": 0}}',
        b'"NodeNameToVictims": {"n": {"Pods": [{"metadata": {"uid": "u"}}]}}',
        b'"NodeNameToVictims": {"n": {"Pods": [{"metadata": {}}]}}',
        b'"NodeNameToVictims": {"n": {"NumPDBViolations": true}}',
        b'"NodeNameToMetaVictims": {"n": {"Pods": [{"UID": "u"}]}}, "NodeNameToVictims": {"n": 5}',
        b'"NodeNameToMetaVictims": {"n": {"NumPDBViolations": 123456789012345678901234567890}}',
        b'"NodeNameToMetaVictims": {"n": {"NumPDBViolations": 9223372036854775807}}',
        b'"NodeNameToMetaVictims": null',
    ],
)
def test_edge_preemptions_are_judged_alike(victims: bytes) -> None:
    agree("preempt", b"{" + POD + b", " + victims + b"}")
