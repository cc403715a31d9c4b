"""The building blocks of the policy format: strict scalar types, the base model, the error."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict
from pydantic.alias_generators import to_camel

Direction = Literal["lower", "higher"]
Normalize = Literal["range", "candidates"]
MissingPolicy = Literal["fail-open", "fail-closed"]
ForeignPods = Literal["refuse", "bind"]
ProviderKind = Literal["prometheus", "static"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
OverloadMode = Literal["taint", "dry-run"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule"]
Estimate = Literal["usage", "request"]

Number = Annotated[float, Strict()]
"""A YAML number: an int or a float, never a string or a bool; finite (allow_inf_nan)."""
Positive = Annotated[float, Strict(), Field(gt=0)]
Seconds = Annotated[float, Strict(), Field(gt=0)]
NonNegative = Annotated[float, Strict(), Field(ge=0)]
Share = Annotated[float, Strict(), Field(gt=0, le=1)]
NonEmpty = Annotated[str, Strict(), Field(min_length=1)]
Count = Annotated[int, Strict(), Field(ge=1)]
Port = Annotated[int, Strict(), Field(ge=0, le=65535)]
MetricName = Annotated[str, Strict(), Field(pattern=r"^[a-z][a-z0-9_]*$")]


def _http_url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return text.rstrip("/")


HttpURL = Annotated[
    str, Strict(), AfterValidator(_http_url), Field(json_schema_extra={"pattern": "^https?://"})
]
"""An http(s) base URL without its trailing slashes (the chart's schema gets the pattern)."""
PolicyName = Annotated[
    str, Strict(), Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
]


class ConfigError(ValueError):
    """The policy is invalid; `problems` lists every bad key with what is wrong."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


class Model(BaseModel):
    """The base of every section: unknown keys are errors, values never change after load."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
    )


RebalanceMode = Literal["dry-run", "evict"]
