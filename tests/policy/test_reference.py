"""extender/policy/reference.py: the policy reference and the chart's policy schema, generated from
the models, match the committed copies and agree with the models and the shipped files."""

from __future__ import annotations

import copy
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from extender.policy import reference
from extender.policy import schema as schemas
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "decice-extender"
POLICY_FILES = sorted(
    path
    for pattern in ("config/*.yaml", "config/policies/*.yaml")
    for path in ROOT.glob(pattern)
    if "kind" not in (yaml.safe_load(path.read_text(encoding="utf-8")) or {})
)
ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def _validator() -> jsonschema.Draft7Validator:
    schema = schemas.policy_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _errors(policy: Any) -> list[str]:
    return [e.message for e in _validator().iter_errors(policy)]


def _without_chart_keys(policy: dict[str, Any]) -> dict[str, Any]:
    """The file as a `values.policy` would give it: without the keys the chart sets."""
    out = copy.deepcopy(policy)
    for path, keys in schemas.CHART_OWNED.items():
        node: Any = out
        for key in path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            for key in keys:
                node.pop(key, None)
    return out


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """`model` and every model its fields hold, however nested (tuple, dict, Optional)."""
    seen: set[type[BaseModel]] = set()
    todo = [model]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        for field in current.model_fields.values():
            todo.extend(_nested(field.annotation))


def _nested(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _nested(arg)


def _model_paths(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Key paths from the models themselves (independent of reference.py's schema walk)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        yield path
        for suffix, nested in _containers(field.annotation):
            yield from _model_paths(nested, f"{path}{suffix}.")


def _containers(annotation: Any, suffix: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield suffix, annotation
        return
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (tuple, list, frozenset, set):
        yield from _containers(args[0], f"{suffix}[]")
    elif origin is dict:
        yield from _containers(args[1], f"{suffix}.{reference.NAME}")
    elif origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in args:
            yield from _containers(arg, suffix)


def _keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item)


def _generated_block(text: str) -> str:
    start = text.index(reference.BEGIN)
    return text[start : text.index(reference.END, start)]


# -- the committed copies ----------------------------------------------------------------------


def test_the_committed_copies_are_up_to_date() -> None:
    diff = reference.check()
    assert diff == "", f"run python -m extender.policy.reference:\n{diff}"


def test_check_reports_a_stale_copy(tmp_path: Path) -> None:
    doc = tmp_path / "configuration.md"
    schema = tmp_path / "values.schema.json"
    doc.write_text(
        reference.DOC.read_text(encoding="utf-8").replace("`server.port`", "`server.prt`"),
        encoding="utf-8",
    )
    schema.write_text(
        reference.VALUES_SCHEMA.read_text(encoding="utf-8").replace('"maxAge"', '"maxAges"'),
        encoding="utf-8",
    )
    diff = reference.check(doc, schema)
    assert "-| `server.prt` |" in diff
    assert re.search(r'^\+\s+"maxAge": \{$', diff, re.MULTILINE)
    assert str(doc) in diff and str(schema) in diff


def test_the_reference_lies_between_the_markers_after_the_yaml_example() -> None:
    text = reference.DOC.read_text(encoding="utf-8")
    assert text.count(reference.BEGIN) == 1 and text.count(reference.END) == 1
    assert text.index("```yaml") < text.index(reference.BEGIN)
    assert "| `policies.NAME.metrics[].filter.above` |" in _generated_block(text)


def test_only_the_policy_block_of_values_schema_is_generated() -> None:
    text = reference.VALUES_SCHEMA.read_text(encoding="utf-8")
    assert reference.values_schema_with_policy(text) == text
    assert text.endswith("}\n") and '\n  "properties": {\n' in text  # json.dumps(indent=2)


# -- the models --------------------------------------------------------------------------------


def test_every_field_of_every_model_has_a_description() -> None:
    models = list(_models(Settings))
    assert {m.__name__ for m in models} >= {
        "Settings",
        "ServerSettings",
        "TLSSettings",
        "PrometheusSettings",
        "BasicAuth",
        "StaticSettings",
        "MetricSettings",
        "FilterThreshold",
        "PolicySettings",
        "HerdGuardSettings",
        "BindSettings",
        "KubernetesSettings",
        "RequeueSettings",
        "PrioritizeSettings",
        "ExplainSettings",
    }
    missing = [
        f"{m.__name__}.{name}"
        for m in models
        for name, field in m.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert missing == []


def test_the_reference_lists_every_key_path_of_the_models_and_no_other() -> None:
    documented = ROW.findall(_generated_block(reference.DOC.read_text(encoding="utf-8")))
    assert len(documented) == len(set(documented))
    assert set(documented) == set(_model_paths(Settings))
    assert documented == [row.path for section in reference.sections() for row in section.rows]


def test_every_documented_key_path_exists_in_the_schema() -> None:
    schema = schemas.settings_schema()
    for path in [row.path for section in reference.sections() for row in section.rows]:
        node: dict[str, Any] = schema
        for part in re.split(r"\.(?![^\[]*\])", path):
            key, _, _ = part.partition("[")
            if key == reference.NAME:
                node = node["additionalProperties"]
                continue
            node = node["properties"][key]
            for _ in range(part.count("[]")):
                node = node["items"]
        assert node, path


def test_types_and_defaults_read_as_yaml() -> None:
    rows = {row.path: row for section in reference.sections() for row in section.rows}
    assert rows["metrics[].weight"].type == "number > 0"
    assert rows["metrics[].weight"].default == "`1`"
    assert rows["metrics[].direction"].type == "one of `lower`, `higher`"
    assert rows["explain.keepPods"].type == "integer >= 1"
    assert rows["server.port"].type == "integer 0..65535"
    assert rows["server.urlPrefix"].default == '`""`'
    assert rows["server.tls.certFile"].type == "string or null"
    assert rows["schedulerNames"].default == "`[decice_sched]`"
    assert rows["policies.NAME.metrics"].default == "required"
    assert "\n" not in rows["requeue.keepSeconds"].description


# -- the chart's policy schema -----------------------------------------------------------------


def test_the_schema_drops_the_chart_owned_keys_and_titles() -> None:
    schema = schemas.policy_schema()
    assert "schedulerNames" not in schema["properties"]
    assert set(schema["properties"]["server"]["properties"]) == {
        "urlPrefix",
        "maxBodyBytes",
        "gracePeriod",
    }
    assert schema["properties"]["server"]["description"] == schemas.SERVER_DESCRIPTION
    assert "title" not in set(_keys(schema))
    assert "$ref" not in repr(schema) and "$defs" not in schema


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_schema_accepts_every_shipped_policy_file(path: Path) -> None:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    parse_settings(raw)  # the extender loads it
    assert _errors(_without_chart_keys(raw)) == []


def test_there_are_policy_files_to_check() -> None:
    names = {p.name for p in POLICY_FILES}
    assert {"extender.yaml", "memory.yaml", "gpu-dcgm.yaml"} <= names
    assert "nginx-pod.yaml" not in names and "scheduler-config.yaml" not in names


def test_the_schema_accepts_the_chart_default_policy() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert _errors(values["policy"]) == []


def test_the_schema_accepts_named_policies_and_nulls() -> None:
    policy = {
        "metrics": None,
        "policies": {
            "batch": {"metrics": [{"name": "cpu", "query": "q", "filter": {"above": 0.9}}]},
            "memory-heavy": {
                "description": "spread by memory",
                "herdMetric": None,
                "metrics": [{"name": "memory", "query": "m", "filter": None}],
            },
        },
        "defaultPolicy": "batch",
        "prometheus": {"basicAuth": None, "caFile": None},
        "prioritize": {"maxHosts": None},
    }
    assert _errors(policy) == []
    parse_settings({**policy, "metrics": None})


@pytest.mark.parametrize(
    ("policy", "wanted"),
    [
        ({"bogus": 1}, "Additional properties are not allowed ('bogus'"),
        ({"metrics": [{"name": "cpu", "filtr": {}}]}, "'filtr' was unexpected"),
        (
            {"policies": {"a": {"metrics": [{"name": "cpu"}], "herd": "cpu"}}},
            "'herd' was unexpected",
        ),
        ({"server": {"port": 8888}}, "'port' was unexpected"),
        ({"server": {"tls": {}}}, "'tls' was unexpected"),
        ({"schedulerNames": ["x"]}, "'schedulerNames' was unexpected"),
        ({"prometheus": {"interval": "15s"}}, "'15s' is not of type 'number'"),
        ({"metrics": [{"name": "cpu", "weight": 0}]}, "less than or equal to the minimum"),
        ({"metrics": [{"name": "cpu", "direction": "up"}]}, "'up' is not one of"),
        ({"metrics": []}, "should be non-empty"),
        ({"policies": {}}, "should be non-empty"),
        ({"policies": {"Bad_Name": {"metrics": [{"name": "cpu"}]}}}, "does not match"),
        ({"policies": {"a": {}}}, "'metrics' is a required property"),
        ({"prometheus": {"url": "prometheus:9090"}}, "does not match '^https?://'"),
        ({"bind": {"enabled": "yes"}}, "'yes' is not of type 'boolean'"),
    ],
)
def test_the_schema_rejects(policy: dict[str, Any], wanted: str) -> None:
    errors = _errors(policy)
    assert any(wanted in e for e in errors), errors


def test_main_check_exits_0_when_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--check"]) == 0
    assert capsys.readouterr().out == ""
