"""The herd guard as the engine runs it: the ledger of placed pods (herd.py, an
assumed-pods cache), the window read from the policy (policy.windows) and what each pod is
counted at (estimate.py).

The engine owns one `HerdGuard` and patches its tables when the guard's load changes.
Pure: no I/O; the snapshot and `now` are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from extender.decisions.estimate import Expectation, expected_cores, expected_use, usage_fresh
from extender.decisions.headroom import Sizes, fit_rule, overflow_node, tight_nodes
from extender.decisions.herd import HerdLedger, Reservation, data_time
from extender.decisions.model import NodeName, Snapshot
from extender.decisions.peaks import NodePeaks
from extender.decisions.pods import PodFacts
from extender.decisions.scoring import evaluate_node
from extender.decisions.table import Table
from extender.policy.policies import Policy
from extender.policy.settings import Settings
from extender.policy.windows import Window, herd_window

SATURATED = 0.95
"""A herd metric at or above this on a node: the node is (nearly) out of CPU, so the metric
no longer tells demand."""


def herd_metrics(settings: Settings) -> frozenset[str]:
    """The metrics the herd guard adds load to, across policies."""
    return frozenset(p.herd_metric for p in settings.policy_map.values() if p.herd_metric)


class HerdGuard:
    def __init__(self, settings: Settings) -> None:
        self.ledger = HerdLedger(settings.herd_guard, settings.herd_guarded)
        guard = settings.herd_guard
        self.peaks = NodePeaks(guard.peak_window, guard.peak_sigmas)
        """Each node's recent spread: its predicted peak's margin (peaks.py)."""
        self.window = Window(0.0, "")
        self.estimates: dict[str, int] = {}
        """Reservations taken, by where their estimate came from (estimate.SOURCES)."""
        self.configure(settings)

    def configure(self, settings: Settings) -> None:
        """The policies in force (at start and on every reload)."""
        self._settings = settings
        self._metrics = herd_metrics(settings)
        self.window = herd_window(settings)
        """The window reservations fade over, and why."""
        self.peaks.configure(settings.herd_guard.peak_window, settings.herd_guard.peak_sigmas)
        self.ledger.configure(settings.herd_guard, settings.herd_guarded, self.window.seconds)

    @property
    def span(self) -> float:
        """Seconds after a bind that a pod can still count: settle, then the window."""
        return self._settings.herd_guard.settle + self.window.seconds

    def expected(self, pod: PodFacts, snapshot: Snapshot, now: float) -> Expectation:
        """What `pod` is expected to use, from the measured use in `snapshot`."""
        return expected_use(
            pod.namespace,
            pod.name,
            pod.workload,
            pod.cpu_request,
            snapshot.usage,
            self._settings.herd_guard,
            now,
        )

    def release(
        self, uid: str, gone: PodFacts | None, snapshot: Snapshot, now: float
    ) -> NodeName | None:
        """The pod was deleted or finished (`gone`: on that node); its node, or None."""
        if gone is None or not gone.node_name:
            return self.ledger.release(uid)
        shown = self.shown_use(gone, snapshot, now)
        return self.ledger.release(uid, (gone.node_name, shown, now))

    def shown_use(self, pod: PodFacts, snapshot: Snapshot, now: float) -> float | None:
        """Cores the metric shows a running pod using, as far as we know it: its own
        measured use, else its workload's (no more than its request: the quantile is a
        high one), else None (nothing is credited for a use we do not know). None too on
        a node the metric shows saturated: there it hides how far demand is over its
        cores, so a pod leaving need not lower it at all."""
        guard = self._settings.herd_guard
        usage = snapshot.usage
        if guard.estimate != "usage" or not usage_fresh(usage, guard, now):
            return None
        for metric in self._metrics:
            series = snapshot.metrics.get(metric)
            value = series.values.get(pod.node_name) if series is not None else None
            if value is not None and value >= SATURATED:
                return None
        own = usage.pods.get((pod.namespace, pod.name))
        if own is not None:
            return own
        key = pod.workload if usage.workloads else None
        use = usage.workloads.get(key) if key is not None else None
        if use is None or use.pods < guard.min_pods:
            return None
        return use.cores if pod.cpu_request is None else min(use.cores, pod.cpu_request)

    def reserve(
        self,
        uid: str,
        node: NodeName,
        pod: PodFacts,
        snapshot: Snapshot,
        now: float,
        source: str,
        assigned_at: float | None = None,
    ) -> Expectation | None:
        """Count a placed pod at its expected use; None when it counts already (or the
        guard is off). `assigned_at`: when the API says it was bound, if earlier."""
        if uid in self.ledger.reservations or not self._settings.herd_guarded:
            return None
        expectation = self.expected(pod, snapshot, now)
        bound_at = now if assigned_at is None else min(now, assigned_at)
        named = (pod.namespace, pod.name) if pod.name else None
        reservation = Reservation(
            uid, node, expectation.cores, bound_at, source, expectation.basis, named
        )
        before = self.ledger.load.get(node, 0.0)
        if not self.ledger.reserve(reservation):
            return None
        self.peaks.shift(node, self.ledger.load.get(node, 0.0) - before)
        self.estimates[expectation.source] = self.estimates.get(expectation.source, 0) + 1
        return expectation

    def fit(
        self,
        policy: Policy,
        table: Table,
        pod: PodFacts,
        names: Sequence[NodeName],
        failed: Mapping[NodeName, str],
        snapshot: Snapshot,
        now: float,
    ) -> tuple[set[NodeName], float]:
        """The asked nodes too small for `pod` (headroom.tight_nodes) and the cores it needs."""
        rule, guard = fit_rule(policy), self._settings.herd_guard
        if table.headroom is None or rule is None or not guard.fit:
            return set(), 0.0
        needs = expected_cores(
            pod.namespace,
            pod.name,
            lambda: pod.workload,
            pod.cpu_request,
            snapshot.usage,
            guard,
            now,
        )
        return tight_nodes(table.headroom, needs, names, failed), needs

    def overflow(
        self,
        policy: Policy,
        table: Table,
        rejected: Mapping[NodeName, str],
        snapshot: Snapshot,
        sizes: Sizes,
        now: float,
        below_capacity: float | None = None,
    ) -> NodeName | None:
        """Where a pod that fits on no node goes anyway (engine.py says when): the node with
        the most headroom of those rejected for the herd metric's threshold alone, not for
        missing data or another metric (`below_capacity`: overflow_node's); None if none."""
        rule = fit_rule(policy)
        if rule is None or not self._settings.herd_guarded:
            return None
        allowed = (rule.over, rule.reason)
        candidates = [n for n, why in rejected.items() if why in allowed]
        # Only the herd metric's threshold may stand aside: a node that would fail another
        # metric (or miss data) with its herd value at 0 keeps the pod off.
        clear = dict.fromkeys(candidates, -math.inf)
        candidates = [
            n
            for n in candidates
            if evaluate_node(policy, snapshot, n, table.stale, clear, now).reason is None
        ]
        return overflow_node(rule, table.evals, candidates, sizes, below_capacity)

    def install(self, snapshot: Snapshot) -> None:
        """A new snapshot: the reservations fade, the nodes' spreads move (peaks.py; those
        of nodes with pods in flight, whose load is not zero, wait)."""
        self.ledger.install(snapshot, self._metrics)
        at = data_time(snapshot, self._metrics)
        if self.peaks.enabled and at is not None:
            load = self.ledger.in_flight()
            predicted = _predicted(snapshot, self._metrics, load)
            self.ledger.set_margins(self.peaks.observe(predicted, at, load.keys()))

    def projected(self, snapshot: Snapshot) -> dict[NodeName, float]:
        """The herd load once `snapshot` is installed (for tables built off the loop)."""
        load = self.ledger.projected(snapshot, self._metrics)
        at = data_time(snapshot, self._metrics)
        if self.peaks.enabled and at is not None:
            predicted = _predicted(snapshot, self._metrics, load)
            for node, margin in self.peaks.preview(predicted, at, set(load)).items():
                load[node] = load.get(node, 0.0) + margin
        return load

    @property
    def load(self) -> Mapping[NodeName, float]:
        return self.ledger.load

    def detail(self, snapshot: Snapshot, now: float) -> dict[str, object]:
        """/readyz's herdGuard section: the window and why, where the estimates come from
        and the measured use they read. Never part of readiness: without measured use,
        pods count at their requests."""
        guard = self._settings.herd_guard
        detail: dict[str, object] = {
            "enabled": self._settings.herd_guarded,
            "settleSeconds": guard.settle,
            "windowSeconds": self.window.seconds,
            "window": self.window.why,
            "estimate": guard.estimate,
            "reservations": len(self.ledger.reservations),
            "estimates": dict(self.estimates),
        }
        if guard.estimate == "usage":
            usage = snapshot.usage
            detail["measuredUse"] = {
                "fresh": usage_fresh(usage, guard, now),
                "ageSeconds": None
                if usage.fetched_at is None
                else round(now - usage.fetched_at, 3),
                "workloads": len(usage.workloads),
                "youngPods": len(usage.pods),
                "error": usage.error,
            }
        return detail


def _predicted(
    snapshot: Snapshot, metrics: Iterable[str], load: Mapping[NodeName, float]
) -> dict[NodeName, float]:
    """node -> the herd metrics' largest value with the herd guard's load added: what we
    predict the node runs at now, whose swings peaks.py follows."""
    out: dict[NodeName, float] = {}
    for name in metrics:
        series = snapshot.metrics.get(name)
        if series is None:
            continue
        for node, value in series.values.items():
            if math.isfinite(value):
                x = value + load.get(node, 0.0)
                out[node] = max(out.get(node, x), x)
    return out
