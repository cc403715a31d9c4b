"""The captured fixtures, and small builders for settings, snapshots and engine answers.

Captured from a real kube-scheduler v1.35.4 (its extender calls) and a real kube-apiserver
(its answers); see the README.md in each folder of tests/fixtures for how and what.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from extender.decisions.engine import Engine
from extender.decisions.model import MetricSeries, Snapshot
from extender.decisions.wire import (
    ExtenderArgs,
    PreemptionArgs,
    encode_filter,
    encode_preemption_result,
    encode_priorities,
)
from extender.policy.loading import parse_settings
from extender.policy.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
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


def filter_answer(engine: Engine, args: ExtenderArgs, now: float = NOW) -> bytes:
    """What the service answers a filter request: the engine decides, wire encodes."""
    return encode_filter(args, engine.filter(args, now))


def prioritize_answer(engine: Engine, args: ExtenderArgs, now: float = NOW) -> bytes:
    return encode_priorities(engine.prioritize(args, now))


def preempt_answer(engine: Engine, args: PreemptionArgs, now: float = NOW) -> bytes:
    return encode_preemption_result(engine.preempt(args, now))


def make_snapshot(values: Mapping[str, Mapping[str, float]], fetched_at: float = NOW) -> Snapshot:
    """metric -> node -> value, all fetched at `fetched_at`."""
    return Snapshot(
        metrics={m: MetricSeries(values=dict(v), fetched_at=fetched_at) for m, v in values.items()},
        taken_at=fetched_at,
        generation=1,
    )
