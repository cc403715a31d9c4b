"""The service's own Prometheus metrics, each mode's series on one registry (passed in,
prometheus/client_python style). Per-request updates are O(1)."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from extender import __version__
from extender.decisions.estimate import SOURCES as ESTIMATE_SOURCES
from extender.decisions.model import Snapshot
from extender.decisions.wire import VERBS, Verb

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Scraped(Collector):
    """Families made when scraped from the state they read: always current, no timer."""

    def __init__(self, families: Callable[[], Iterator[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return self._families()


def _family(
    name: str,
    documentation: str,
    labels: list[str],
    rows: Iterable[tuple[list[str], float]],
    kind: type[GaugeMetricFamily] | type[CounterMetricFamily] = GaugeMetricFamily,
) -> Metric:
    family = kind(name, documentation, labels=labels)
    for values, value in rows:
        family.add_metric(values, value)
    return family


NodeFigures = tuple[Mapping[str, Mapping[str, int]], Mapping[str, Mapping[str, float]]]
"""(policy -> node -> score, metric -> node -> value) of the tables in force."""
PlacementFigures = tuple[Mapping[str, int], int, int, Mapping[str, bool]]
"""(reservations by source, turned-away pods, requeue patches pending, watch -> up)."""
ConfigFigures = tuple[bool, float, str]
"""(last reload successful, unix time of the last successful load, sha256 of the active file)."""
ExceedanceCounts = Mapping[tuple[str, str, str], int]
"""(policy, verdict, outcome) -> placements settled so since the start."""


def _ages(snapshot: Snapshot, now: float) -> Iterator[Metric]:
    metrics = snapshot.metrics.items()
    yield _family(
        "decice_metric_age_seconds",
        "Seconds since the metric's last successful refresh (+Inf before the first).",
        ["metric"],
        (([n], math.inf if s.fetched_at is None else now - s.fetched_at) for n, s in metrics),
    )
    yield _family(
        "decice_metric_nodes",
        "Nodes with a value in the current snapshot.",
        ["metric"],
        (([n], float(len(s.values))) for n, s in metrics),
    )


def _node_figures(figures: NodeFigures) -> Iterator[Metric]:
    """From the tables the scheduler is answered from: no work per request."""
    scores, values = figures
    yield _family(
        "decice_node_score",
        "The node's prioritize score (0..10) for our pods of each policy.",
        ["node", "policy"],
        (([n, p], float(v)) for p, by_node in scores.items() for n, v in by_node.items()),
    )
    yield _family(
        "decice_node_metric",
        "The node's value of each policy metric in the current snapshot.",
        ["node", "metric"],
        (([n, m], v) for m, by_node in values.items() for n, v in by_node.items()),
    )


def _placement(figures: PlacementFigures, counted: Mapping[str, int]) -> Iterator[Metric]:
    reservations, turned_away, pending, watches = figures
    yield _family(
        "decice_herd_reservations",
        "Pods the herd guard counts on their node until fresh metrics include them, "
        "by who told us: bind (ours), watch (any binder), nominated or expected (not "
        "bound yet).",
        ["source"],
        (([s], float(reservations.get(s, 0))) for s in ("bind", "watch", "nominated", "expected")),
    )
    yield _family(
        "decice_herd_estimates",
        "Placed pods counted by the herd guard, by where their expected use came "
        "from: workload (its running siblings' measured use), own (its own measured "
        "use), request (its CPU request: no trusted measurement) or default (no "
        "request).",
        ["source"],
        (([s], float(counted.get(s, 0))) for s in ESTIMATE_SOURCES),
        kind=CounterMetricFamily,
    )
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
    yield _family(
        "decice_watch_up",
        "1 while the watch of the resource is established, else 0.",
        ["resource"],
        (([r], float(up)) for r, up in watches.items()),
    )


def _config(figures: ConfigFigures) -> Iterator[Metric]:
    """The policy file's reload state (names as Prometheus' and Alertmanager's own:
    alert on `..._successful == 0`)."""
    successful, success_at, sha256 = figures
    yield GaugeMetricFamily(
        "decice_config_last_reload_successful",
        "1 if the last reload of the policy file succeeded, 0 if it failed (the "
        "previous policy is still in force).",
        value=float(successful),
    )
    yield GaugeMetricFamily(
        "decice_config_last_reload_success_timestamp_seconds",
        "Unix time the policy in force was loaded (at start or by a reload).",
        value=success_at,
    )
    yield _family(
        "decice_config_info",
        "Always 1; sha256 (first 12 hex digits) of the policy file in force.",
        ["sha256"],
        [([sha256[:12]], 1.0)],
    )


def _exceedance(counts: ExceedanceCounts) -> Iterator[Metric]:
    """The shadow's ledger: the summary at /shadow reads the same counts."""
    yield _family(
        "decice_shadow_exceedance",
        "Placements judged, by what the chosen node did within "
        "shadow.exceedanceWindow after: exceeded (went over the policy's threshold; "
        "counted when seen), under (stayed at or under it the whole window), "
        "unobserved (no fresh value of the node in the window), dropped (more than "
        "shadow.keep watched at once). The exceedance share: exceeded / (exceeded + "
        "under).",
        ["policy", "verdict", "outcome"],
        ((list(key), float(n)) for key, n in sorted(counts.items())),
        kind=CounterMetricFamily,
    )


class RebalanceTelemetry:
    """The rebalancer's counters, on the registry of the service it runs in."""

    def __init__(self, registry: CollectorRegistry, leading: Callable[[], bool]) -> None:
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


class ShadowTelemetry:
    """Shadow mode's series: the placements judged and what their nodes did after."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.assignments = Counter(
            "decice_shadow_assignments",
            "Placements another scheduler made, judged against our scores: best (our best "
            "node), top3, other (a node our filter passes), rejected (one it rejects).",
            ["policy", "verdict"],
            registry=registry,
        )
        self.gap = Histogram(
            "decice_shadow_score_gap",
            "Our best node's score (0..10) less the chosen node's.",
            ["policy"],
            buckets=range(11),
            registry=registry,
        )
        self.rejected = Counter(
            "decice_shadow_rejected",
            "Placements onto nodes our filter rejects, by its reason.",
            ["policy", "reason"],
            registry=registry,
        )

    def judged(self, policy: str, verdict: str, gap: int, reason: str | None) -> None:
        self.assignments.labels(policy, verdict).inc()
        self.gap.labels(policy).observe(gap)
        if reason is not None:
            self.rejected.labels(policy, reason).inc()

    def watch_exceedance(self, counts: Callable[[], ExceedanceCounts]) -> None:
        self.registry.register(_Scraped(lambda: _exceedance(counts())))


class Telemetry:
    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.registry = r = CollectorRegistry()
        Info(
            "decice_build",
            "The running build: decice-extender's version, Python's, and the git commit.",
            registry=r,
        ).info(
            {
                "version": __version__,
                "python_version": platform.python_version(),
                # The commit the image was built from (the Dockerfile's GIT_COMMIT).
                "git_commit": environ.get("DECICE_GIT_COMMIT", ""),
            }
        )
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
        self.registry.register(_Scraped(lambda: _ages(snapshot(), clock())))

    def watch_nodes(self, figures: Callable[[], NodeFigures]) -> None:
        self.registry.register(_Scraped(lambda: _node_figures(figures())))

    def watch_placement(
        self,
        figures: Callable[[], PlacementFigures],
        estimates: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.registry.register(_Scraped(lambda: _placement(figures(), estimates())))

    def watch_config(self, figures: Callable[[], ConfigFigures]) -> None:
        self.registry.register(_Scraped(lambda: _config(figures())))

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
