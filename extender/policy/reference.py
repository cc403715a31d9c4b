"""The policy format's reference, generated from its JSON schema (extender.policy.schema)
into two committed copies: docs/configuration.md's key tables (between the BEGIN/END
markers) and the `policy` property of the chart's values.schema.json.

    python -m extender.policy.reference           # rewrites both
    python -m extender.policy.reference --check   # exits 1 with a diff when either is stale
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from extender.policy.schema import Schema, policy_schema, settings_schema

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
VALUES_SCHEMA = ROOT / "deploy" / "helm" / "decice-extender" / "values.schema.json"

COMMAND = "python -m extender.policy.reference"
BEGIN = f"<!-- BEGIN GENERATED: policy reference ({COMMAND}) -->"
END = "<!-- END GENERATED: policy reference -->"

NAME = "NAME"
"""The placeholder of a map key in key paths: policies.NAME.metrics[]."""


class Row(NamedTuple):
    """One key of the reference."""

    path: str
    type: str
    default: str
    description: str


class Section(NamedTuple):
    """The keys of one object: `path` ("" for the top level) and its description."""

    path: str
    description: str
    rows: tuple[Row, ...]


def sections(node: Schema | None = None, path: str = "", about: str = "") -> Iterator[Section]:
    """Every object of the policy, depth first in field order, each with its keys."""
    if node is None:
        node = settings_schema()
        about = str(node.get("description", ""))
    properties: dict[str, Schema] = node.get("properties", {})
    required = set(node.get("required", []))
    paths = {key: f"{path}.{key}" if path else key for key in properties}
    rows = tuple(
        Row(
            path=paths[key],
            type=readable_type(sub),
            default="required" if key in required else _default(sub),
            description=" ".join(str(sub.get("description", "")).split()),
        )
        for key, sub in properties.items()
    )
    yield Section(path, about, rows)
    for key, sub in properties.items():
        for child_path, child in _objects(paths[key], sub):
            yield from sections(child, child_path, str(sub.get("description", "")))


def _objects(path: str, node: Schema) -> Iterator[tuple[str, Schema]]:
    """The objects with keys of their own reachable from `node`, with their paths."""
    if "properties" in node:
        yield path, node
        return
    items = node.get("items")
    if isinstance(items, dict):
        yield from _objects(f"{path}[]", items)
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        yield from _objects(f"{path}.{NAME}", values)


def readable_type(node: Schema) -> str:
    """A schema node in words: `number > 0`, `one of lower, higher`, `string or null`..."""
    kinds = node.get("type")
    nullable = isinstance(kinds, list) and "null" in kinds
    kind = next((k for k in kinds if k != "null"), "null") if isinstance(kinds, list) else kinds
    text = _readable(node, kind)
    if not nullable:
        return text
    return f"{text}, or null" if "," in text else f"{text} or null"


def _readable(node: Schema, kind: Any) -> str:
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"] if v is not None)
    if kind in ("number", "integer"):
        if "minimum" in node and "maximum" in node:
            return f"{kind} {node['minimum']:g}..{node['maximum']:g}"
        for key, sign in (("exclusiveMinimum", ">"), ("minimum", ">="), ("maximum", "<=")):
            if key in node:
                return f"{kind} {sign} {node[key]:g}"
        return str(kind)
    if kind == "string":
        text = "non-empty string" if node.get("minLength") == 1 else "string"
        if "pattern" in node:
            text = f"string matching `{node['pattern']}`"
        if "maxLength" in node:
            text += f", at most {node['maxLength']} characters"
        return text
    if kind == "array":
        items = readable_type(node.get("items", {}))
        what = re.sub(r"\b(string|number|integer|boolean|object)\b", r"\1s", items, count=1)
        unique = "unique " if node.get("uniqueItems") else ""
        least = f" (at least {node['minItems']})" if "minItems" in node else ""
        return f"list{least} of {unique}{what}"
    if kind == "object":
        if "properties" in node:
            return "object (keys below)"
        values, keys = node.get("additionalProperties"), node.get("propertyNames")
        key_text = NAME if isinstance(keys, dict) and "pattern" in keys else "string"
        value_text = readable_type(values) if isinstance(values, dict) else "anything"
        least = f" (at least {node['minProperties']})" if "minProperties" in node else ""
        return f"map{least} of {key_text} to {value_text}"
    return str(kind)


def _default(node: Schema) -> str:
    if "default" not in node:
        if "properties" in node:
            return "(keys below)"
        return "required" if node.get("type") not in ("object", "array") else "(see description)"
    return f"`{yaml_value(node['default'])}`"


def yaml_value(value: Any) -> str:
    """A default as it would be written in the policy file (flow style, one line)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value == "":
        return '""'
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def markdown_reference() -> str:
    """The reference: one table per object of the policy file, every key with its type,
    default and description."""
    lines = [
        "Every key of the policy file, generated from the models in `extender/policy/` "
        f"(`{COMMAND}` rewrites this part; CI fails when it is out of date). `{NAME}` stands "
        "for a key you choose (a policy's name), `[]` for each item of a list.",
        "",
    ]
    for section in sections():
        title = f"`{section.path}`" if section.path else "Top level"
        lines += [f"### {title}", ""]
        if section.description:
            lines += [_cell(section.description, escape_pipes=False), ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for row in section.rows:
            cells = (f"`{row.path}`", row.type, row.default, row.description)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _cell(text: str, *, escape_pipes: bool = True) -> str:
    text = " ".join(text.split()).replace("<", "&lt;")
    return text.replace("|", "\\|") if escape_pipes else text


def doc_with_reference(current: str) -> str:
    """docs/configuration.md's text with the part between the markers regenerated."""
    start = current.find(BEGIN)
    end = current.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.name}: the markers {BEGIN!r} and {END!r} are missing")
    return current[: start + len(BEGIN)] + "\n\n" + markdown_reference() + "\n" + current[end:]


def values_schema_with_policy(current: str) -> str:
    """values.schema.json's text with its `policy` property regenerated, the rest as is."""
    data = json.loads(current)
    data["properties"]["policy"] = policy_schema()
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def stale(doc: Path = DOC, values_schema: Path = VALUES_SCHEMA) -> list[tuple[Path, str, str]]:
    """(path, committed text, generated text) of each copy that is out of date."""
    copies = ((doc, doc_with_reference), (values_schema, values_schema_with_policy))
    texts = ((path, path.read_text(encoding="utf-8"), generate) for path, generate in copies)
    return [(path, text, wanted) for path, text, make in texts if (wanted := make(text)) != text]


def check(doc: Path = DOC, values_schema: Path = VALUES_SCHEMA) -> str:
    """A unified diff of every out-of-date copy; empty when both are current."""
    return "".join(
        "".join(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                wanted.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile=f"{path} (generated from extender/policy/)",
            )
        )
        for path, current, wanted in stale(doc, values_schema)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="Generate the policy reference and the chart's policy schema."
    )
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when stale")
    args = parser.parse_args(argv)
    if args.check:
        diff = check()
        if not diff:
            return 0
        sys.stdout.write(diff)
        print(f"\nthe generated policy reference is out of date: run {COMMAND}", file=sys.stderr)
        return 1
    for path, _, wanted in stale():
        path.write_text(wanted, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
