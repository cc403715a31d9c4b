"""A node's predicted peak: its herd metric now, plus what it is likely to swing to before
the next refresh shows a pod placed there. Pure.

The herd guard already adds what the metric does not show yet (herd.py); what is left is
the swing no scheduler explains: work of other schedulers, daemons, noisy neighbours, a
workload whose use moves. A node that has swung up lately is likely to swing up again,
so it gets less headroom than a steady one at the same level. The spread is tracked per
node as an exponentially weighted mean and upward variance (swings above the mean only: a
node that dropped has the room it shows) of the value we predict for it (the metric plus
the herd guard's load), over `herdGuard.peakWindow`; the margin is `herdGuard.peakSigmas`
times how far that spread is above the typical node's, at most MAX_MARGIN.

Our own pods are no swing: the herd guard explains them. A pod placed moves the node's mean
with it at once (`shift`), or the step would read as a swing of the pod's whole size (a
step s gives a spread of up to s/2, and a margin of up to s: the pod counted twice, for
twenty minutes). And while the herd guard holds pods in flight on a node (placed pods the
metric does not show whole yet, or pods gone that it still shows), its value is the metric
plus our estimates, which deliberately overlap the metric for a while (a reservation is
whole for `settle`, a departure's credit ends before a slow rate lets go): the node's
spread waits (`held`) until the metric alone tells it again. LoadVariationRiskBalancing
(scheduler-plugins pkg/trimaran/loadvariationriskbalancing) scores on mean + margin x sd
the same way, from load-watcher's 15-minute window; here the spread also filters.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping
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

    def _moved(
        self, values: Mapping[NodeName, float], at: float, held: Collection[NodeName]
    ) -> dict[NodeName, Spread]:
        out = {}
        for node, value in values.items():
            old = self._spreads.get(node)
            out[node] = old if old is not None and node in held else self._next(node, value, at)
        return out

    def preview(
        self, values: Mapping[NodeName, float], at: float, held: Collection[NodeName] = ()
    ) -> dict[NodeName, float]:
        """node -> the margin `observe(values, at, held)` would give (nothing is kept)."""
        if not self.enabled:
            return {}
        return self._margins(self._moved(values, at, held))

    def observe(
        self, values: Mapping[NodeName, float], at: float, held: Collection[NodeName] = ()
    ) -> dict[NodeName, float]:
        """A refresh's predicted values (node -> metric + herd load): the spreads move, a
        node without a value is forgotten; node -> margin. A node in `held` (the herd guard
        has pods in flight on it) keeps its spread as it was."""
        if not self.enabled:
            self._spreads = {}
            return {}
        self._spreads = self._moved(values, at, held)
        return self._margins(self._spreads)

    def shift(self, node: NodeName, by: float) -> None:
        """A pod of ours was counted on `node`: its predicted value moves by `by` at once,
        explained, so its mean moves with it (the module's docstring)."""
        old = self._spreads.get(node)
        if old is not None and by:
            self._spreads[node] = Spread(old.mean + by, old.variance, old.at)

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
