"""The service's own Prometheus metrics (logging setup: extender.service.logs).

A registry is passed in (prometheus/client_python style) so every test builds its own.
Per-request updates are O(1): one counter and one histogram observation per call.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from extender import __version__
from extender.decisions.estimate import SOURCES as ESTIMATE_SOURCES
from extender.decisions.model import Snapshot
from extender.decisions.wire import VERBS, Verb

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _CacheAgeCollector(Collector):
    """Age of each metric's data, computed when scraped (always current, no timer)."""

    def __init__(self, snapshot: Callable[[], Snapshot], clock: Callable[[], float]) -> None:
        self._snapshot = snapshot
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily(
            "decice_metric_age_seconds",
            "Seconds since the metric's last successful refresh (+Inf before the first).",
            labels=["metric"],
        )
        nodes = GaugeMetricFamily(
            "decice_metric_nodes", "Nodes with a value in the current snapshot.", labels=["metric"]
        )
        now = self._clock()
        for name, series in self._snapshot().metrics.items():
            fetched = series.fetched_at
            age.add_metric([name], float("inf") if fetched is None else now - fetched)
            nodes.add_metric([name], float(len(series.values)))
        yield age
        yield nodes


NodeFigures = tuple[Mapping[str, Mapping[str, int]], Mapping[str, Mapping[str, float]]]
"""(policy -> node -> score, metric -> node -> value) of the tables in force."""


class _NodeCollector(Collector):
    """Each node's score and metric values, read from the precomputed table when scraped:
    no work per request, and always the answers the scheduler is being given."""

    def __init__(self, figures: Callable[[], NodeFigures]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        scores, values = self._figures()
        score = GaugeMetricFamily(
            "decice_node_score",
            "The node's prioritize score (0..10) for our pods of each policy.",
            labels=["node", "policy"],
        )
        for policy, node_scores in scores.items():
            for node, value in node_scores.items():
                score.add_metric([node, policy], float(value))
        metric = GaugeMetricFamily(
            "decice_node_metric",
            "The node's value of each policy metric in the current snapshot.",
            labels=["node", "metric"],
        )
        for name, by_node in values.items():
            for node, v in by_node.items():
                metric.add_metric([node, name], v)
        yield score
        yield metric


PlacementFigures = tuple[Mapping[str, int], int, int, Mapping[str, bool]]
"""(reservations by source, turned-away pods, requeue patches pending, watch -> up)."""


class _PlacementCollector(Collector):
    """Herd-guard reservations, turned-away pods and watch health, read when scraped."""

    def __init__(
        self,
        figures: Callable[[], PlacementFigures],
        estimates: Callable[[], Mapping[str, int]],
    ) -> None:
        self._figures = figures
        self._estimates = estimates

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        reservations, turned_away, pending, watches = self._figures()
        held = GaugeMetricFamily(
            "decice_herd_reservations",
            "Pods the herd guard counts on their node until fresh metrics include them, by "
            "who told us: bind (ours), watch (any binder), nominated or expected (not bound yet).",
            labels=["source"],
        )
        for source in ("bind", "watch", "nominated", "expected"):
            held.add_metric([source], float(reservations.get(source, 0)))
        yield held
        estimates = CounterMetricFamily(
            "decice_herd_estimates",
            "Placed pods counted by the herd guard, by where their expected use came from: "
            "workload (its running siblings' measured use), own (its own measured use), "
            "request (its CPU request: no trusted measurement) or default (no request).",
            labels=["source"],
        )
        for source in ESTIMATE_SOURCES:
            estimates.add_metric([source], float(self._estimates().get(source, 0)))
        yield estimates
        yield GaugeMetricFamily(
            "decice_turned_away_pods",
            "Pods our filter turned away from every node, waiting for metrics to recover.",
            value=float(turned_away),
        )
        yield GaugeMetricFamily(
            "decice_requeue_pending",
            "Recovered pods waiting for their requeue patch (rate-limited).",
            value=float(pending),
        )
        up = GaugeMetricFamily(
            "decice_watch_up",
            "1 while the watch of the resource is established, else 0.",
            labels=["resource"],
        )
        for resource, watching in watches.items():
            up.add_metric([resource], 1.0 if watching else 0.0)
        yield up


ConfigFigures = tuple[bool, float, str]
"""(last reload successful, unix time of the last successful load, sha256 of the active file)."""


class _ConfigCollector(Collector):
    """The policy file's reload state, read from the reloader when scraped (names as
    Prometheus' and Alertmanager's own: alert on `..._successful == 0`)."""

    def __init__(self, figures: Callable[[], ConfigFigures]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        successful, success_at, sha256 = self._figures()
        yield GaugeMetricFamily(
            "decice_config_last_reload_successful",
            "1 if the last reload of the policy file succeeded, 0 if it failed (the previous "
            "policy is still in force).",
            value=1.0 if successful else 0.0,
        )
        yield GaugeMetricFamily(
            "decice_config_last_reload_success_timestamp_seconds",
            "Unix time the policy in force was loaded (at start or by a reload).",
            value=success_at,
        )
        info = GaugeMetricFamily(
            "decice_config_info",
            "Always 1; sha256 (first 12 hex digits) of the policy file in force.",
            labels=["sha256"],
        )
        info.add_metric([sha256[:12]], 1.0)
        yield info


class RebalanceTelemetry:
    """The rebalancer's counters, on the registry of the service it runs in (only the
    rebalancer exports them: the extender's /metrics stays as it was)."""

    def __init__(
        self, registry: CollectorRegistry, leading: Callable[[], bool] | None = None
    ) -> None:
        if leading is not None:
            Gauge(
                "decice_rebalance_leader",
                "1 while this rebalancer holds the Lease (only the holder evicts).",
                registry=registry,
            ).set_function(lambda: float(leading()))
        self.decisions = Counter(
            "decice_rebalance_decisions",
            "Rebalancer decisions by mode and outcome: would_move (dry-run), evicted, "
            "blocked (a PodDisruptionBudget said wait, 429), gone (404 or recreated), "
            "failed, held (a limit), waiting (sustain), stay.",
            ["mode", "outcome"],
            registry=registry,
        )
        self.cycles = Counter(
            "decice_rebalance_cycles",
            "Rebalancer checks by result: done, skipped (not the leader), failed.",
            ["result"],
            registry=registry,
        )
        self.refusals = Counter(
            "decice_rebalance_refusals",
            "Evictions the API refused for now, by reason: budget (a PodDisruptionBudget "
            "allows no disruption), budget-not-processed, multiple-budgets, throttled (429). "
            "The pod waits, doubling from the interval up to 10 minutes.",
            ["reason"],
            registry=registry,
        )

    def rebalanced(self, mode: str, outcome: str, count: int = 1) -> None:
        self.decisions.labels(mode, outcome).inc(count)

    def rebalance_cycle(self, result: str) -> None:
        self.cycles.labels(result).inc()

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()


class OverloadTelemetry:
    """The overload taint writer's series."""

    def __init__(self, registry: CollectorRegistry, tainted: Callable[[], int]) -> None:
        Gauge(
            "decice_overload_tainted_nodes",
            "Nodes carrying our decice.io/overloaded taint, as the node watch shows them.",
            registry=registry,
        ).set_function(lambda: float(tainted()))
        self.changes = Counter(
            "decice_overload_changes",
            "Overload taint changes by action (taint, untaint) and outcome: done, unchanged "
            "(already so), conflict (the node kept changing), failed, dry-run.",
            ["action", "outcome"],
            registry=registry,
        )

    def overload_changed(self, action: str, outcome: str) -> None:
        self.changes.labels(action, outcome).inc()


GIT_COMMIT_ENV = "DECICE_GIT_COMMIT"
"""Where the image keeps the commit it was built from (the Dockerfile's GIT_COMMIT)."""


def build_labels(environ: Mapping[str, str]) -> dict[str, str]:
    """decice_build_info's labels: our version, Python's, and the git commit the image was
    built from ("" when unknown, e.g. a pip install from a source tree)."""
    return {
        "version": __version__,
        "python_version": platform.python_version(),
        "git_commit": environ.get(GIT_COMMIT_ENV, ""),
    }


class Telemetry:
    def __init__(
        self, registry: CollectorRegistry | None = None, environ: Mapping[str, str] = os.environ
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        Info(
            "decice_build",
            "The running build: decice-extender's version, Python's, and the git commit.",
            registry=r,
        ).info(build_labels(environ))
        self.requests = Counter(
            "decice_requests",
            "Extender requests by verb and HTTP status.",
            ["verb", "code"],
            registry=r,
        )
        self.latency = Histogram(
            "decice_request_duration_seconds",
            "Server time per extender request.",
            ["verb"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "decice_decisions",
            "Per-node filter verdicts and bind outcomes.",
            ["verb", "outcome"],
            registry=r,
        )
        self.refresh_errors = Counter(
            "decice_refresh_errors", "Failed metric queries.", ["metric"], registry=r
        )
        self.refresh_duration = Histogram(
            "decice_refresh_duration_seconds",
            "Time of one refresh of all metrics.",
            buckets=_BUCKETS,
            registry=r,
        )
        self.events = Counter(
            "decice_events",
            "Events on placed pods: posted, failed (not retried), dropped (queue full).",
            ["outcome"],
            registry=r,
        )
        self.watch_restarts = Counter(
            "decice_watch_restarts",
            "Watch restarts by resource and reason: expired (410 Gone, listed again) or error.",
            ["resource", "reason"],
            registry=r,
        )
        self.requeue_patches = Counter(
            "decice_requeue_patches",
            "Requeue patches of turned-away pods by outcome: patched, gone (404), recreated "
            "(422, UID changed), forbidden, error, skipped (bound meanwhile), dropped.",
            ["outcome"],
            registry=r,
        )
        # Children resolved once: labels() costs a dict lookup and a lock per call.
        self._latency = {v: self.latency.labels(v) for v in VERBS}
        self._ok = {v: self.requests.labels(v, "200") for v in VERBS}
        self._passed = self.decisions.labels("filter", "passed")
        self._failed = self.decisions.labels("filter", "failed")

    def watch(
        self, snapshot: Callable[[], Snapshot], clock: Callable[[], float] = time.time
    ) -> None:
        self.registry.register(_CacheAgeCollector(snapshot, clock))

    def watch_nodes(self, figures: Callable[[], NodeFigures]) -> None:
        self.registry.register(_NodeCollector(figures))

    def watch_placement(
        self,
        figures: Callable[[], PlacementFigures],
        estimates: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.registry.register(_PlacementCollector(figures, estimates))

    def watch_config(self, figures: Callable[[], ConfigFigures]) -> None:
        self.registry.register(_ConfigCollector(figures))

    def watch_restart(self, resource: str, reason: str) -> None:
        self.watch_restarts.labels(resource, reason).inc()

    def requeued(self, outcome: str) -> None:
        self.requeue_patches.labels(outcome).inc()

    def observe(self, verb: Verb, code: int, seconds: float) -> None:
        self._latency[verb].observe(seconds)
        if code == 200:
            self._ok[verb].inc()
        else:
            self.requests.labels(verb, str(code)).inc()

    def filtered(self, passed: int, failed: int) -> None:
        self._passed.inc(passed)
        if failed:
            self._failed.inc(failed)

    def event(self, outcome: str) -> None:
        self.events.labels(outcome).inc()

    def bound(self, outcome: str) -> None:
        self.decisions.labels("bind", outcome).inc()

    def refreshed(self, snapshot: Snapshot, errors: Mapping[str, str], seconds: float) -> None:
        self.refresh_duration.observe(seconds)
        for name in errors:
            self.refresh_errors.labels(name).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
