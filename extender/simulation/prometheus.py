"""Node CPU as the shipped policy sees it: scraped, averaged over a window, then polled.

The lag is the reason the herd guard exists and the reason a burst can overshoot, so it is
modelled step by step rather than assumed away:

1. node-exporter's CPU counters are scraped every `scrape_interval` (15 s). A sample is the
   counter: the integral of the node's (capped) utilisation since boot.
2. The recording rule `instance:node_cpu_utilisation:rate5m` is evaluated every
   `rule_interval` (30 s, the prometheus-operator default `evaluationInterval`). Its
   rate over `rate_window` (5 min) is the counter's increase between the first and last
   samples inside (T - window, T] divided by the time between them: the mean utilisation
   over the scrape intervals between those samples. A node needs two samples to have a
   value at all (a new node has none at first).
3. Our refresher queries it every `prometheus.interval` of the policy (15 s in the shipped
   file) and installs what the latest evaluation said.

All three run on one clock, aligned at 0 (a scrape, an evaluation and a refresh falling on
the same instant happen in that order), so the lag modelled is the least a real cluster
shows; real phases only add to it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pipeline:
    scrape_interval: int = 15
    rate_window: int = 300
    rule_interval: int = 30
    refresh_interval: int = 15

    def __post_init__(self) -> None:
        for name in ("scrape_interval", "rate_window", "rule_interval", "refresh_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 second")
        if self.rate_window < 2 * self.scrape_interval:
            raise ValueError("rate_window must hold at least two scrapes")

    @property
    def tick(self) -> int:
        """The simulation's step: every event of the pipeline falls on a tick."""
        return math.gcd(self.scrape_interval, self.rule_interval, self.refresh_interval)

    @property
    def intervals_in_window(self) -> int:
        """Scrape intervals a rate spans: samples inside the window, less one."""
        return math.ceil(self.rate_window / self.scrape_interval) - 1


class MetricPipeline:
    """Per node: the scrape intervals' mean utilisation; the rule's latest answer."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._since_scrape: dict[str, float] = {}
        """node -> utilisation x seconds since its last scrape (the counter's increase)."""
        self._elapsed: dict[str, float] = {}
        self._intervals: dict[str, deque[float]] = {}
        """node -> mean utilisation of each scrape interval inside the window, oldest first."""
        self._evaluated: dict[str, float] = {}
        self.evaluated_at: float | None = None

    def observe(self, node: str, utilisation: float, seconds: float) -> None:
        """The node ran at `utilisation` (0..1) for `seconds`; nodes not yet scraped once
        have no counter sample to measure from, so this only counts after a first scrape."""
        if node in self._intervals:
            self._since_scrape[node] += utilisation * seconds
            self._elapsed[node] += seconds

    def scrape(self, nodes: Iterable[str]) -> None:
        keep = self.pipeline.intervals_in_window
        for node in nodes:
            window = self._intervals.get(node)
            if window is None:  # its first sample: a rate needs a second one
                self._intervals[node] = deque(maxlen=keep)
            elif self._elapsed[node] > 0:
                window.append(self._since_scrape[node] / self._elapsed[node])
            self._since_scrape[node] = 0.0
            self._elapsed[node] = 0.0

    def evaluate(self, now: float) -> None:
        """The recording rule: each node's mean over the window's intervals."""
        self._evaluated = {
            node: sum(window) / len(window) for node, window in self._intervals.items() if window
        }
        self.evaluated_at = now

    def query(self) -> Mapping[str, float]:
        """What a query for the recorded series answers now: the latest evaluation."""
        return self._evaluated
