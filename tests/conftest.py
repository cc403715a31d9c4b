"""Shared test helpers: the captured fixtures and small builders for settings and engines."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from extender.config import Settings, parse_settings
from extender.model import MetricSeries, Snapshot

# Copies of ../shared/fixtures (real kube-scheduler and kube-apiserver captures), kept in
# the repository so the suite runs on a machine without shared/.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCHEDULER = FIXTURES / "kube-scheduler"
APISERVER = FIXTURES / "kube-apiserver"
NOW = 1_800_000_000.0


def fixture_bytes(name: str) -> bytes:
    return (SCHEDULER / name).read_bytes()


def fixture_json(name: str) -> Any:
    return orjson.loads(fixture_bytes(name))


def make_settings(**overrides: Any) -> Settings:
    """A static-provider policy with one `cpu` metric; overrides replace top-level keys."""
    raw: dict[str, Any] = {
        "provider": "static",
        "static": {"nodes": {"node-1": {"cpu": 0.5}}},
        "metrics": [{"name": "cpu"}],
    }
    raw.update(overrides)
    return parse_settings(raw)


def make_snapshot(values: Mapping[str, Mapping[str, float]], fetched_at: float = NOW) -> Snapshot:
    """metric -> node -> value, all fetched at `fetched_at`."""
    return Snapshot(
        metrics={m: MetricSeries(values=dict(v), fetched_at=fetched_at) for m, v in values.items()},
        taken_at=fetched_at,
        generation=1,
    )


@pytest.fixture
def settings_factory() -> Callable[..., Settings]:
    return make_settings
