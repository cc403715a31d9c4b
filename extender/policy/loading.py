"""Reading a policy: YAML plus environment overrides in, `Settings` or one error listing
every problem by its key path out."""

from __future__ import annotations

import difflib
import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from extender.policy.fields import ConfigError
from extender.policy.settings import Settings


def parse_settings(
    raw: Any, environ: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Build Settings from parsed YAML; raise ConfigError naming every bad key."""
    if raw is None:
        raise ConfigError(["$: the file is empty"], source)
    if not isinstance(raw, dict):
        raise ConfigError([f"$: must be a mapping, got {type(raw).__name__}"], source)
    raw = _with_environment(raw, environ or {})
    try:
        return Settings.model_validate(raw, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc), source) from None


def load_settings(path: str | Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate a policy file. Environment: PROMETHEUS_URL, KUBECONFIG."""
    return read_policy(path, environ or {})[0]


def read_policy(path: str | Path, environ: Mapping[str, str]) -> tuple[Settings, str]:
    """The file's Settings and the sha256 of the very bytes they came from (one read)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError([f"cannot read {path}: {exc.strerror or exc}"], str(path)) from exc
    return parse_text(data, environ, str(path)), hashlib.sha256(data).hexdigest()


def parse_text(
    text: str | bytes, environ: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Settings from the policy file's text or bytes (what a reload reads)."""
    try:
        raw = yaml.safe_load(text if isinstance(text, str) else text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"$: not UTF-8 text ({exc.reason} at byte {exc.start})"], source
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], source) from exc
    return parse_settings(raw, environ, source)


def _with_environment(raw: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """PROMETHEUS_URL and KUBECONFIG replace their keys (as in the original DECICE setup)."""
    raw = dict(raw)
    for section, key, var in (
        ("prometheus", "url", "PROMETHEUS_URL"),
        ("kubernetes", "kubeconfig", "KUBECONFIG"),
    ):
        value = env.get(var)
        if not value:
            continue
        current = raw.get(section)
        raw[section] = {**(current if isinstance(current, dict) else {}), key: value}
    return raw


def describe_errors(exc: ValidationError) -> list[str]:
    """One line per problem: `path: what is wrong (got value)`, paths as written in YAML."""
    out: list[str] = []
    for error in exc.errors(include_url=False):
        path, kind = _path(error["loc"]), error["type"]
        message = str(error["msg"]).removeprefix("Value error, ")
        if kind == "extra_forbidden":
            hint = difflib.get_close_matches(str(error["loc"][-1]), _known_keys(), n=1)
            out.append(f"{path}: unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
        elif kind == "missing":
            out.append(f"{path}: required")
        elif kind == "value_error" and error["loc"] == ():
            out.extend(message.split("\n"))  # _policy_problems: each names its path
        elif kind == "value_error":
            out.append(f"{path}: {message}")
        else:
            out.append(f"{path}: {message} (got {repr(error['input'])[:80]})")
    return out


def _path(loc: tuple[int | str, ...]) -> str:
    path = "$"
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif "[" in part or part in ("function-after", "function-before"):
            continue  # pydantic's names for union members and validators, not keys
        else:
            path = part if path == "$" else f"{path}.{part}"
    return path


@functools.cache
def _known_keys() -> list[str]:
    """Every key of the format, to suggest the one a typo meant."""
    schema = Settings.model_json_schema(by_alias=True)
    nodes = (schema, *schema["$defs"].values())
    return sorted({key for node in nodes for key in node.get("properties", {})})
