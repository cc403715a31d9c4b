"""A node's predicted peak: its herd metric now, plus what it is likely to swing to before
the next refresh shows a pod placed there. Pure.

The herd guard already adds what the metric does not show yet (herd.py); what is left is
the swing no scheduler explains: work of other schedulers, daemons, noisy neighbours, a
workload whose use moves. A node that has swung up lately is likely to swing up again,
so it gets less headroom than a steady one at the same level. The spread is tracked per
node as an exponentially weighted mean and upward variance (swings above the mean only: a
node that dropped has the room it shows) of the value we predict for it (the metric plus
the herd guard's load, so that our own placements, which the herd guard explains, add
little to it), over `herdGuard.peakWindow`; the margin is `herdGuard.peakSigmas` times how
far that spread is above the typical node's, at most MAX_MARGIN. LoadVariationRiskBalancing
(scheduler-plugins pkg/trimaran/loadvariationriskbalancing) scores on mean + margin x sd
the same way, from load-watcher's 15-minute window; here the spread also filters.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from extender.decisions.model import NodeName

MAX_MARGIN = 0.2
"""The largest margin a spread adds (a node that jumped from idle to busy is not judged
as if it could swing by its whole jump again)."""


@dataclass(frozen=True, slots=True)
class Spread:
    mean: float
    variance: float
    at: float


class NodePeaks:
    """Per node, the recent mean and spread of its predicted value."""

    def __init__(self, window: float, sigmas: float) -> None:
        self.window = window
        self.sigmas = sigmas
        self._spreads: dict[NodeName, Spread] = {}

    def configure(self, window: float, sigmas: float) -> None:
        self.window, self.sigmas = window, sigmas

    @property
    def enabled(self) -> bool:
        return self.window > 0 and self.sigmas > 0

    def _next(self, node: NodeName, value: float, at: float) -> Spread:
        old = self._spreads.get(node)
        if old is None:
            return Spread(value, 0.0, at)
        if at <= old.at:
            return old
        alpha = 1.0 - math.exp(-(at - old.at) / self.window)
        delta = value - old.mean
        mean = old.mean + alpha * delta
        # Swings up only (a semi-variance): a node that dropped, whose pods left or whose
        # unseen work ended, has room now; it is no riskier for having been busier.
        up = max(delta, 0.0)
        variance = (1.0 - alpha) * (old.variance + alpha * up * up)
        return Spread(mean, variance, at)

    def preview(self, values: Mapping[NodeName, float], at: float) -> dict[NodeName, float]:
        """node -> the margin `observe(values, at)` would give (nothing is kept)."""
        if not self.enabled:
            return {}
        return self._margins({node: self._next(node, v, at) for node, v in values.items()})

    def observe(self, values: Mapping[NodeName, float], at: float) -> dict[NodeName, float]:
        """A refresh's predicted values (node -> metric + herd load): the spreads move, a
        node without a value is forgotten; node -> margin."""
        if not self.enabled:
            self._spreads = {}
            return {}
        self._spreads = {node: self._next(node, value, at) for node, value in values.items()}
        return self._margins(self._spreads)

    def _margins(self, spreads: Mapping[NodeName, Spread]) -> dict[NodeName, float]:
        """node -> sigmas x how far its spread is above the typical node's (the median):
        the filter threshold's own margin already covers the swings every node has."""
        sds = {n: math.sqrt(max(s.variance, 0.0)) for n, s in spreads.items()}
        if not sds:
            return {}
        typical = statistics.median(sds.values())
        out = {}
        for node, sd in sds.items():
            margin = min(MAX_MARGIN, self.sigmas * (sd - typical))
            if margin > 0:
                out[node] = margin
        return out

    def spread(self, node: NodeName) -> float | None:
        """The node's spread (standard deviation) now, or None when it has none yet."""
        s = self._spreads.get(node)
        return math.sqrt(s.variance) if s is not None else None
