"""Shadow mode's own Prometheus series (on the registry of the service's Telemetry; the
other modes' /metrics stay as they are): the placements judged, the score gaps, the
rejections, and what the chosen nodes did after (exceedance)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

ExceedanceCounts = Mapping[tuple[str, str, str], int]
"""(policy, verdict, outcome) -> placements settled so since the start."""


class _ExceedanceCollector(Collector):
    """The exceedance counts, read from the shadow's ledger when scraped (one source: the
    summary at /shadow reads the same counts)."""

    def __init__(self, counts: Callable[[], ExceedanceCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "decice_shadow_exceedance",
            "Placements judged, by what the chosen node did within shadow.exceedanceWindow "
            "after: exceeded (went over the policy's threshold; counted when seen), under "
            "(stayed at or under it the whole window), unobserved (no fresh value of the "
            "node in the window), dropped (more than shadow.keep watched at once). The "
            "exceedance share: exceeded / (exceeded + under).",
            labels=["policy", "verdict", "outcome"],
        )
        for (policy, verdict, outcome), count in sorted(self._counts().items()):
            family.add_metric([policy, verdict, outcome], float(count))
        yield family


class ShadowTelemetry:
    """Shadow mode's series: every placement judged, the score gaps, the rejections, and
    (`watch_exceedance`) the exceedances."""

    GAP_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)

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
            buckets=self.GAP_BUCKETS,
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
        self.registry.register(_ExceedanceCollector(counts))
