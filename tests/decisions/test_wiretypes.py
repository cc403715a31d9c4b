"""The one field the wire types keep as text, the Pod, is read by decisions.pods.read_pod;
the `Pod` Struct that documents it (in the OpenAPI document) accepts exactly the pods
read_pod accepts: every captured scheduler pod, then mutations of them and random JSON,
each put to both. (Every other field is decoded by the types themselves.)"""

from __future__ import annotations

from typing import Any

import hypothesis
import msgspec
import orjson
import pytest
from hypothesis import strategies as st

from extender.decisions import wiretypes
from extender.decisions.pods import PodError, read_pod
from tests.harness.fixtures import SCHEDULER, fixture_json
from tests.reliability.test_fuzz import json_values, mutated

CHECKS = hypothesis.settings(max_examples=300, deadline=None, database=None)
REQUESTS = [p.name for p in SCHEDULER.glob("*.json") if not p.name.endswith(".response.json")]


def read_pod_takes(pod: Any) -> bool:
    try:
        read_pod(pod)
    except PodError:
        return False
    return True


def struct_takes(pod: Any) -> bool:
    try:
        msgspec.json.decode(orjson.dumps(pod), type=wiretypes.Pod)
    except msgspec.ValidationError:
        return False
    return True


def agree(pod: Any) -> None:
    reader, struct = read_pod_takes(pod), struct_takes(pod)
    assert reader == struct, (
        f"read_pod {'takes' if reader else 'refuses'} and the Pod Struct "
        f"{'takes' if struct else 'refuses'} {orjson.dumps(pod)[:400]!r}"
    )


def test_every_captured_pod_is_taken_by_both() -> None:
    pods = [fixture_json(name).get("Pod") for name in REQUESTS]
    assert len([p for p in pods if p is not None]) >= 6
    for pod in filter(None, pods):
        assert read_pod_takes(pod) and struct_takes(pod)


@pytest.mark.parametrize("verb", ["filter", "preempt"])
@CHECKS
@hypothesis.given(data=st.data())
def test_mutated_pods_are_judged_alike(verb: str, data: st.DataObject) -> None:
    body = data.draw(mutated(verb))
    if isinstance(body, dict) and "Pod" in body:
        agree(body["Pod"])


@CHECKS
@hypothesis.given(value=json_values)
def test_random_json_is_judged_alike(value: Any) -> None:
    agree(value)
    agree({"metadata": value})
    agree({"metadata": {"name": "p"}, "spec": value})


@pytest.mark.parametrize(
    "pod",
    [
        {"metadata": {"name": "p"}, "spec": []},
        {"metadata": {"name": "p"}, "spec": None},
        {"metadata": {"name": "p", "uid": 1}},
        {"metadata": {"name": "p"}, "spec": {"containers": {}}},
        {"metadata": {}},
        None,
    ],
)
def test_edge_pods_are_judged_alike(pod: Any) -> None:
    agree(pod)
