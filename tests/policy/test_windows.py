"""extender.policy.windows: the rate window a metric's PromQL averages over."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.policy.loading import parse_settings
from extender.policy.policies import DEFAULT_CPU_QUERY
from extender.policy.windows import duration, herd_window, query_window, rule_window
from tests.harness.fixtures import make_settings


@pytest.mark.parametrize(
    ("query", "seconds", "why"),
    [
        ("rate(node_cpu_seconds_total[1m])", 60, "1m from [1m] in the query"),
        ("1 - avg by (instance) (rate(x{mode='idle'}[90s]))", 90, "90s from [90s]"),
        ("instance:node_cpu_utilisation:rate5m", 300, "from the recording rule"),
        ("node:node_cpu_utilization:ratio_rate5m", 300, "recording rule"),
        ("x:sum_irate", 0, "recording rule"),
        ("irate(x[5m])", 0, "irate reads the last two samples only"),
        ("node_load1", 0, "no rate window"),
        ("avg_over_time(node_load1[10m])", 600, "10m from [10m]"),
        ("max(rate(a[1m]) or rate(b[5m]))", 60, "the shortest of 1m, 5m"),
        ("rate(a[1m]) or rate(b[5m])", 60, "the shortest"),  # duplicates: the highest kept
        ("avg(rate(a[1m]) or rate(b[5m]))", 300, "the longest of 1m, 5m"),
        ("rate(a[1m]) + rate(b[2m])", 120, "the longest"),
        ("max_over_time(rate(a[1m])[10m:30s])", 600, "the longest"),
        ("rate(", 0, "does not parse"),
    ],
)
def test_query_window(query: str, seconds: float, why: str) -> None:
    window = query_window(query)
    assert window.seconds == seconds
    assert why in window.why


def test_the_shipped_query_is_a_one_minute_rise() -> None:
    from extender.policy.loading import load_settings

    shipped = load_settings(Path(__file__).resolve().parents[2] / "config" / "extender.yaml")
    window = herd_window(shipped)
    assert window.seconds == 60, window.why
    assert "the shortest of 1m, 5m" in window.why
    assert query_window(DEFAULT_CPU_QUERY).seconds == 60


def test_durations_and_rule_names() -> None:
    assert duration("1h30m") == 5400 and duration("500ms") == 0.5 and duration("5x") is None
    # One reader for every duration Prometheus and VictoriaMetrics write (a retention too).
    assert duration("1.5h") == 5400 and duration("12M") == 12 * 31 * 86400
    assert duration("") is None and duration("5") is None and duration("5m ") is None
    assert rule_window("a:b:rate1m") == 60 and rule_window("a:b:increase1h") == 3600
    assert rule_window("a:b:rate") is None and rule_window("node_cpu") is None


def test_herd_window_is_the_policy_setting_or_read_from_the_herd_metric() -> None:
    explicit = make_settings(herdGuard={"window": 120.0})
    assert herd_window(explicit).seconds == 120 and "herdGuard.window" in herd_window(explicit).why
    static = make_settings()
    assert herd_window(static).seconds == 0 and "static" in herd_window(static).why
    two = parse_settings(
        {
            "provider": "prometheus",
            "prometheus": {"url": "http://127.0.0.1:9090"},
            "policies": {
                "fast": {"metrics": [{"name": "cpu", "query": "rate(x[1m])"}]},
                "slow": {
                    "metrics": [{"name": "cpu5", "query": "rate(x[5m])"}],
                    "herdMetric": "cpu5",
                },
            },
            "defaultPolicy": "fast",
        }
    )
    window = herd_window(two)
    assert window.seconds == 300 and "metric cpu5, the longest of the policies'" in window.why
