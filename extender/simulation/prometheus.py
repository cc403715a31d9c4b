"""Node CPU as the shipped policy sees it: scraped, averaged over a window, then polled.

The lag is the reason the herd guard exists and the reason a burst can overshoot, so it is
modelled step by step rather than assumed away:

1. node-exporter's CPU counters are scraped every `scrape_interval` (15 s). A sample is the
   counter: the integral of the node's (capped) utilisation since boot.
2. The recording rule `instance:node_cpu_utilisation:rate5m` (1 - the rate of the idle
   counters) is evaluated every `rule_interval` (30 s, the prometheus-operator default
   `evaluationInterval`) over `rate_window` (5 min), as PromQL's rate() computes
   (promql/functions.go, extrapolatedRate): the counter's increase between the first and
   last samples inside (T - window, T], divided by the time between them, then scaled by
   (that time + the gaps to the window's edges) / window, a gap of more than 1.1 sample
   intervals counting half an interval. A series that began inside the window is diluted:
   a node seen for 30 s shows its idle rate at a tenth, so its utilisation near 100 %
   (`extrapolated_share`). A node needs two samples to have a value at all.
3. Our refresher queries it every `prometheus.interval` of the policy (15 s in the shipped
   file) and installs what the latest evaluation said.
4. "Rises fast, falls slow": the refresher also reads a raw rate of the counters over
   `fast_window` (1 minute: `rate(node_cpu_seconds_total[1m])`, no recording rule, so no
   rule lag), and the metric is the larger of the two where both have a value (either
   alone where only one has). `fast_window` 0: the rule alone.

The rule's answers are kept for `history_window` (15 minutes): load-watcher reads them
through `avg_over_time` and `stddev_over_time` (peers.loadwatcher) of
`instance:node_cpu:ratio`, the rate of the busy counters (a new node's diluted busy rate
shows it nearly idle). Memory is a gauge (`instance:node_memory_utilisation:ratio`): the
rule records the last scrape's value.

All three run on one clock, aligned at 0 (a scrape, an evaluation and a refresh falling on
the same instant happen in that order), so the lag modelled is the least a real cluster
shows; real phases only add to it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pipeline:
    scrape_interval: int = 15
    rate_window: int = 300
    rule_interval: int = 30
    refresh_interval: int = 15
    fast_window: int = 60
    """The raw rate's window; 0: no raw rate, the recorded rule alone."""
    history_window: int = 900
    """How long the rule's answers are kept (load-watcher's 15-minute window)."""

    def __post_init__(self) -> None:
        for name in ("scrape_interval", "rate_window", "rule_interval", "refresh_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 second")
        if self.rate_window < 2 * self.scrape_interval:
            raise ValueError("rate_window must hold at least two scrapes")
        if self.fast_window != 0 and self.fast_window < 2 * self.scrape_interval:
            raise ValueError("fast_window must be 0 (off) or hold at least two scrapes")
        if self.history_window < self.rule_interval:
            raise ValueError("history_window must hold at least one rule evaluation")

    @property
    def tick(self) -> int:
        """The simulation's step: every event of the pipeline falls on a tick."""
        return math.gcd(self.scrape_interval, self.rule_interval, self.refresh_interval)

    @property
    def intervals_in_window(self) -> int:
        """Scrape intervals a rate spans: samples inside the window, less one."""
        return math.ceil(self.rate_window / self.scrape_interval) - 1

    @property
    def fast_intervals(self) -> int:
        """Scrape intervals the raw rate spans (0: off)."""
        if self.fast_window == 0:
            return 0
        return math.ceil(self.fast_window / self.scrape_interval) - 1


Evaluation = tuple[float, float, float]
"""One rule evaluation of a node for load-watcher: (time, `instance:node_cpu:ratio` 0..1,
memory utilisation 0..1)."""


def extrapolated_share(
    first: float, last: float, at: float, window: float, samples: int, zero_at: float | None = None
) -> float:
    """What PromQL's rate() over [window] at `at` shows of a counter's rate between its
    first and last samples inside the window (`samples` of them, at least 2): the sampled
    time plus the gaps to the window's edges, over the window. A gap of 1.1 sample
    intervals or more counts half an interval; a counter that started from 0 at `zero_at`
    is not extrapolated before then."""
    sampled = last - first
    average = sampled / (samples - 1)
    to_start, to_end = first - (at - window), at - last
    if to_start >= average * 1.1:
        to_start = average / 2
    if zero_at is not None:
        to_start = min(to_start, first - zero_at)
    if to_end >= average * 1.1:
        to_end = average / 2
    return (sampled + to_start + to_end) / window


class MetricPipeline:
    """Per node: the scrape intervals' mean utilisation; the rule's latest answer."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._since_scrape: dict[str, float] = {}
        """node -> utilisation x seconds since its last scrape (the counter's increase)."""
        self._elapsed: dict[str, float] = {}
        self._intervals: dict[str, deque[float]] = {}
        """node -> mean utilisation of each scrape interval inside the window, oldest first."""
        self._first: dict[str, float] = {}
        """node -> when its series began (its first scrape)."""
        self._scraped: dict[str, float] = {}
        """node -> its last scrape."""
        self._next_scrape = 0.0
        self._evaluated: dict[str, float] = {}
        self.evaluated_at: float | None = None
        self._memory: dict[str, float] = {}
        """node -> memory utilisation at its last scrape."""
        self._history: dict[str, deque[Evaluation]] = {}
        self._keep = max(pipeline.intervals_in_window, pipeline.fast_intervals)
        self._evaluations = pipeline.history_window // pipeline.rule_interval

    def observe(self, node: str, utilisation: float, seconds: float) -> None:
        """The node ran at `utilisation` (0..1) for `seconds`; nodes not yet scraped once
        have no counter sample to measure from, so this only counts after a first scrape."""
        if node in self._intervals:
            self._since_scrape[node] += utilisation * seconds
            self._elapsed[node] += seconds

    def scrape(
        self,
        nodes: Iterable[str],
        memory: Mapping[str, float] | None = None,
        at: float | None = None,
    ) -> None:
        """A scrape of node-exporter on `nodes` at `at` (by default one scrape interval after
        the previous scrape, the first at 0: Prometheus scrapes on a fixed interval);
        `memory`: node -> memory utilisation."""
        if at is None:
            at = self._next_scrape
        self._next_scrape = at + self.pipeline.scrape_interval
        for node in nodes:
            window = self._intervals.get(node)
            if window is None:  # its first sample: a rate needs a second one
                self._intervals[node] = deque(maxlen=self._keep)
                self._first.setdefault(node, at)
            elif self._elapsed[node] > 0:
                window.append(self._since_scrape[node] / self._elapsed[node])
            self._scraped[node] = at
            self._since_scrape[node] = 0.0
            self._elapsed[node] = 0.0
            if memory is not None:
                self._memory[node] = memory.get(node, 0.0)

    def known(self, nodes: Iterable[str]) -> None:
        """Nodes whose series began long before the run (the cluster's nodes at its start):
        their rates are not diluted by a series that starts inside the window; what they
        ran before the run is taken as what the run saw first."""
        for node in nodes:
            self._first[node] = -math.inf

    def _rate(self, node: str, window: float, at: float) -> tuple[float, float] | None:
        """(mean utilisation between its first and last samples inside (at - window, at],
        extrapolated_share) of a node, or None with fewer than two samples."""
        intervals = self._intervals.get(node)
        if intervals is None:
            return None
        scrape = self.pipeline.scrape_interval
        first, last = self._first[node], self._scraped[node]
        samples = min(math.ceil((last - (at - window)) / scrape), len(intervals) + 1)
        if first != -math.inf:
            samples = min(samples, round((last - first) / scrape) + 1)
        if samples < 2:
            return None
        used = _last(intervals, samples - 1)
        mean = sum(used) / len(used)
        if first == -math.inf:
            return mean, 1.0
        return mean, extrapolated_share(last - (samples - 1) * scrape, last, at, window, samples)

    def evaluate(self, now: float) -> None:
        """The recording rules: each node's utilisation (1 - the idle rate) for us, the
        busy rate for load-watcher's history."""
        window = self.pipeline.rate_window
        evaluated = {}
        for node in self._intervals:
            rate = self._rate(node, window, now)
            if rate is None:
                continue
            mean, share = rate
            evaluated[node] = 1 - (1 - mean) * share
            history = self._history.get(node)
            if history is None:
                history = self._history[node] = deque(maxlen=self._evaluations)
            history.append((now, mean * share, self._memory.get(node, 0.0)))
        self._evaluated = evaluated
        self.evaluated_at = now

    def query(self) -> Mapping[str, float]:
        """What a query for the recorded series answers now: the latest evaluation."""
        return self._evaluated

    def fast(self, at: float) -> dict[str, float]:
        """The raw rate over `fast_window` at `at`: each node's 1 - its idle rate."""
        window = self.pipeline.fast_window
        out: dict[str, float] = {}
        if not window:
            return out
        for node in self._intervals:
            rate = self._rate(node, window, at)
            if rate is not None:
                mean, share = rate
                out[node] = 1 - (1 - mean) * share
        return out

    def metric(self, at: float) -> dict[str, float]:
        """What our CPU metric answers at `at`: the larger of the rule and the raw rate where
        both have a value, whichever has one elsewhere (the rule alone with no fast window)."""
        out = dict(self._evaluated)
        for node, value in self.fast(at).items():
            if value > out.get(node, -1.0):
                out[node] = value
        return out

    def history(self, node: str) -> Sequence[Evaluation]:
        """The node's rule evaluations within `history_window`, oldest first."""
        return self._history.get(node, ())


def _last(window: deque[float], k: int) -> list[float]:
    """The last `k` intervals of a window (all of them when it holds fewer)."""
    n = len(window)
    return list(window) if n <= k else [window[i] for i in range(n - k, n)]
