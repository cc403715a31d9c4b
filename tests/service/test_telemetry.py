"""extender.service.telemetry: the service's own metrics, on a registry each test builds."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from extender.decisions.model import MetricSeries, Snapshot
from extender.service.telemetry import Telemetry


def samples(t: Telemetry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(t.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_requests_latency_and_decisions() -> None:
    t = Telemetry()
    t.observe("filter", 200, 0.002)
    t.observe("filter", 400, 0.001)
    t.filtered(passed=4, failed=1)
    t.filtered(passed=5, failed=0)
    t.bound("bound")
    got = samples(t)
    assert got[("decice_requests_total", (("code", "200"), ("verb", "filter")))] == 1
    assert got[("decice_requests_total", (("code", "400"), ("verb", "filter")))] == 1
    assert got[("decice_request_duration_seconds_count", (("verb", "filter"),))] == 2
    assert got[("decice_decisions_total", (("outcome", "passed"), ("verb", "filter")))] == 9
    assert got[("decice_decisions_total", (("outcome", "failed"), ("verb", "filter")))] == 1
    assert got[("decice_decisions_total", (("outcome", "bound"), ("verb", "bind")))] == 1


def test_no_false_gauges() -> None:
    """Nothing is exported that no code path sets (a gauge stuck at 0 would read as a fact)."""
    names = {name for name, _ in samples(Telemetry())}
    assert not any("reservation" in n for n in names)


def test_metric_age_is_computed_when_scraped() -> None:
    now = [1000.0]
    snapshot = Snapshot(
        metrics={
            "cpu": MetricSeries(values={"a": 0.1, "b": 0.2}, fetched_at=990.0),
            "mem": MetricSeries(),
        },
        taken_at=990.0,
    )
    t = Telemetry()
    t.watch(lambda: snapshot, lambda: now[0])
    got = samples(t)
    assert got[("decice_metric_age_seconds", (("metric", "cpu"),))] == 10.0
    assert math.isinf(got[("decice_metric_age_seconds", (("metric", "mem"),))])
    assert got[("decice_metric_nodes", (("metric", "cpu"),))] == 2
    now[0] = 1030.0
    assert samples(t)[("decice_metric_age_seconds", (("metric", "cpu"),))] == 40.0


def test_refresh_errors_per_metric() -> None:
    t = Telemetry()
    t.refreshed(Snapshot.empty(["cpu"]), {"cpu": "ConnectionError: down"}, 0.3)
    t.refreshed(Snapshot.empty(["cpu"]), {}, 0.1)
    got = samples(t)
    assert got[("decice_refresh_errors_total", (("metric", "cpu"),))] == 1
    assert got[("decice_refresh_duration_seconds_count", ())] == 2


def test_node_scores_and_metric_values_for_dashboards() -> None:
    t = Telemetry()
    scores = {"default": {"a": 8, "b": 1}, "batch": {"a": 3}}
    t.watch_nodes(lambda: (scores, {"cpu": {"a": 0.2, "b": 0.95}}))
    got = samples(t)
    assert got[("decice_node_score", (("node", "a"), ("policy", "default")))] == 8
    assert got[("decice_node_score", (("node", "b"), ("policy", "default")))] == 1
    assert got[("decice_node_score", (("node", "a"), ("policy", "batch")))] == 3
    assert ("decice_node_score", (("node", "b"), ("policy", "batch"))) not in got
    assert got[("decice_node_metric", (("metric", "cpu"), ("node", "b")))] == 0.95
