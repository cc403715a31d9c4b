"""Node CPU as the shipped policy sees it: scraped, averaged over a window, then polled.

The lag is why the herd guard exists, so it is modelled: node-exporter's counters are
scraped every `scrape_interval`; the rule `instance:node_cpu_utilisation:rate5m` is
evaluated every `rule_interval` as PromQL's rate() computes (promql/functions.go,
extrapolatedRate); our refresher reads it every `refresh_interval`, taking the larger of
it and a raw rate over `fast_window`. Clocks align at 0: the least lag a cluster shows.
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
    fast_window: int = 60  # 0: the recorded rule alone
    history_window: int = 900  # load-watcher's 15-minute window

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


Evaluation = tuple[float, float, float]
"""One rule evaluation for load-watcher: (time, `instance:node_cpu:ratio`, memory)."""


def extrapolated_share(
    first: float, last: float, at: float, window: float, samples: int, zero_at: float | None = None
) -> float:
    """The share of a counter's rate between its first and last samples that rate() over
    `window` shows: gaps to the window's edges count, half an interval past 1.1 of one,
    never back before `zero_at` (a counter starting from 0)."""
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
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._since_scrape: dict[str, float] = {}
        self._elapsed: dict[str, float] = {}
        self._intervals: dict[str, deque[float]] = {}
        """node -> mean utilisation of each scrape interval in the window, oldest first."""
        self._first: dict[str, float] = {}
        self._scraped: dict[str, float] = {}
        self._next_scrape = 0.0
        self._evaluated: dict[str, float] = {}
        self.evaluated_at: float | None = None
        self._memory: dict[str, float] = {}
        self._history: dict[str, deque[Evaluation]] = {}
        # The scrape intervals the longer window (the rule's or the raw rate's) holds.
        widest = max(pipeline.rate_window, pipeline.fast_window)
        self._keep = math.ceil(widest / pipeline.scrape_interval) - 1
        self._evaluations = pipeline.history_window // pipeline.rule_interval

    def observe(self, node: str, utilisation: float, seconds: float) -> None:
        if node in self._intervals:
            self._since_scrape[node] += utilisation * seconds
            self._elapsed[node] += seconds

    def scrape(
        self,
        nodes: Iterable[str],
        memory: Mapping[str, float] | None = None,
        at: float | None = None,
    ) -> None:
        """A scrape at `at` (by default an interval after the previous one)."""
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
        """Nodes whose series began long before the run: their rates are not diluted."""
        for node in nodes:
            self._first[node] = -math.inf

    def _rate(self, node: str, window: float, at: float) -> tuple[float, float] | None:
        """(mean utilisation between the window's first and last samples, its share)."""
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
        used = list(intervals)[1 - samples :]
        mean = sum(used) / len(used)
        if first == -math.inf:
            return mean, 1.0
        return mean, extrapolated_share(last - (samples - 1) * scrape, last, at, window, samples)

    def evaluate(self, now: float) -> None:
        """The rules: utilisation (1 - the idle rate) for us, the busy rate for load-watcher."""
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
        return self._evaluated

    def fast(self, at: float) -> dict[str, float]:
        window = self.pipeline.fast_window
        rates = {n: self._rate(n, window, at) for n in self._intervals} if window else {}
        return {n: 1 - (1 - r[0]) * r[1] for n, r in rates.items() if r is not None}

    def metric(self, at: float) -> dict[str, float]:
        """Our CPU metric at `at`: the larger of the rule and the raw rate where both answer."""
        out = dict(self._evaluated)
        for node, value in self.fast(at).items():
            if value > out.get(node, -1.0):
                out[node] = value
        return out

    def history(self, node: str) -> Sequence[Evaluation]:
        return self._history.get(node, ())
