"""Trimaran's TargetLoadPacking and LoadVariationRiskBalancing, as scheduler-plugins computes.

Read, not copied, from kubernetes-sigs/scheduler-plugins (master, 2026-08):
- pkg/trimaran/targetloadpacking/targetloadpacking.go: the score and PredictUtilisation;
- pkg/trimaran/handler.go: bound pods the metrics may not show yet ("missing");
- pkg/trimaran/loadvariationriskbalancing/analysis.go, pkg/trimaran/resourcestats.go: mu, sigma;
- apis/config/v1/defaults.go: 1000m default requests, target 40 %, margin 1, sensitivity 1;
- manifests/trimaran/scheduler-config.yaml: TargetLoadPacking's profile (Fit's scores off);
- pkg/trimaran/loadvariationriskbalancing/README.md: its example (sensitivity 2, weight 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from extender.simulation.framework import Feeds, Plugin
from extender.simulation.peers.loadwatcher import LoadWatcher, NodeLoad, WatcherMetrics
from extender.simulation.upstream import MAX_NODE_SCORE, NodeRequests, round_half_away
from extender.simulation.workload import PodSpec

DEFAULT_REQUESTS_MILLI = 1000
REPORTING_INTERVAL = 60  # metricsAgentReportingIntervalSeconds
TARGET_UTILIZATION = 40
REQUESTS_MULTIPLIER = 1.0  # the manifest's defaultRequestsMultiplier (the default is 1.5)
SAFE_VARIANCE_MARGIN = 1.0
SAFE_VARIANCE_SENSITIVITY = 2.0


def predict_utilisation(
    request_milli: int | None,
    limit_milli: int | None,
    multiplier: float = REQUESTS_MULTIPLIER,
    default_milli: int = DEFAULT_REQUESTS_MILLI,
) -> int:
    if limit_milli is not None:
        return limit_milli
    if request_milli is not None:
        return int(round_half_away(request_milli * multiplier))
    return default_milli


def pod_prediction(pod: PodSpec, multiplier: float = REQUESTS_MULTIPLIER) -> int:
    return predict_utilisation(pod.cpu_milli, pod.cpu_limit_milli, multiplier)


def target_load_score(predicted: float, target: int = TARGET_UTILIZATION) -> int:
    if predicted > target:
        if predicted > 100:
            return 0
        return int(round_half_away(target * (100 - predicted) / (100 - target)))
    return int(round_half_away((100 - target) * predicted / target + target))


def still_missing(bound_at: int, window_end: int) -> bool:
    return bound_at > window_end or window_end - bound_at < REPORTING_INTERVAL


def risk_score(
    avg_percent: float,
    std_percent: float,
    capacity: float,
    request: float,
    margin: float = SAFE_VARIANCE_MARGIN,
    sensitivity: float = SAFE_VARIANCE_SENSITIVITY,
) -> float:
    """computeScore for one resource: (1 - (mu + sigma) / 2) x 100."""
    if capacity <= 0:
        return 0.0
    used_avg = max(min(avg_percent * capacity / 100, capacity), 0.0)
    used_std = max(min(std_percent * capacity / 100, capacity), 0.0)
    mu = max(min((used_avg + max(request, 0.0)) / capacity, 1.0), 0.0)
    sigma = max(min(used_std / capacity, 1.0), 0.0)
    if sensitivity > 0:
        sigma = sigma ** (1 / sensitivity)
    elif sensitivity == 0:  # Go: sigma^(+Inf)
        sigma = 0.0 if sigma < 1 else 1.0
    sigma = max(min(sigma * margin, 1.0), 0.0)
    return (1 - (mu + sigma) / 2) * MAX_NODE_SCORE


def risk_balancing_score(load: NodeLoad | None, node: NodeRequests, pod: PodSpec) -> int:
    """A node's score: the lower of CPU's (millicores) and memory's (MiB)."""
    if load is None:
        return 0
    mib = 1024 * 1024
    cpu = risk_score(load.cpu_avg, load.cpu_std, node.cpu, pod.cpu_milli)
    memory = risk_score(load.memory_avg, load.memory_std, node.memory / mib, pod.memory / mib)
    return int(round_half_away(min(cpu, memory)))


class TargetLoadPacking(Plugin):
    def __init__(self, target: int = TARGET_UTILIZATION, multiplier: float = REQUESTS_MULTIPLIER):
        self.target = target
        self.multiplier = multiplier
        self.watcher = LoadWatcher()
        self.bound_pods: dict[str, dict[str, tuple[int, int]]] = {}
        """ScheduledPodsCache: node -> uid -> (seen assigned, predicted millicores)."""
        self._missing: dict[str, tuple[int, int]] = {}

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        self.watcher.observe(t, now, feeds.prometheus, list(feeds.nodes))

    def bound(self, pod: PodSpec, node: str, now: float) -> None:
        prediction = pod_prediction(pod, self.multiplier)
        self.bound_pods.setdefault(node, {})[pod.uid] = (math.floor(now), prediction)
        self._missing.pop(node, None)

    def released(self, pod: PodSpec, node: str, now: float) -> None:
        self.bound_pods.get(node, {}).pop(pod.uid, None)
        self._missing.pop(node, None)

    def missing(self, node: str, end: int) -> int:
        hit = self._missing.get(node)
        if hit is not None and hit[0] == end:
            return hit[1]
        pods = self.bound_pods.get(node, {})
        value = sum(p for at, p in pods.values() if still_missing(at, end))
        self._missing[node] = (end, value)
        return value

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        metrics = self.watcher.collected
        if metrics is None:
            return [0] * len(nodes)
        incoming = pod_prediction(pod, self.multiplier)
        end = metrics.window_end
        out = []
        for n in nodes:
            load = metrics.hosts.get(n.name)
            if load is None or n.cpu == 0:
                out.append(0)
                continue
            missing = self.missing(n.name, end)
            predicted = 100 * (load.cpu_avg / 100 * n.cpu + incoming + missing) / n.cpu
            out.append(target_load_score(predicted, self.target))
        return out


class LoadVariationRiskBalancing(Plugin):
    def __init__(self) -> None:
        self.watcher = LoadWatcher()
        self._cache: dict[tuple[int, int], dict[str, int]] = {}
        self._cached_for: WatcherMetrics | None = None
        self._predicted: WatcherMetrics | None = None

    def observe(self, t: float, now: float, feeds: Feeds) -> None:
        self.watcher.observe(t, now, feeds.prometheus, list(feeds.nodes))

    def take_predictions(self) -> Mapping[str, tuple[float, float]]:
        metrics = self.watcher.collected
        if metrics is None or metrics is self._predicted:
            return {}
        self._predicted = metrics
        return {n: (h.cpu_avg / 100, h.cpu_std / 100) for n, h in metrics.hosts.items()}

    def score(self, pod: PodSpec, nodes: Sequence[NodeRequests], now: float) -> list[int] | None:
        metrics = self.watcher.collected
        if metrics is None:
            return [0] * len(nodes)
        if metrics is not self._cached_for:  # a node's score moves only with its metrics
            self._cache, self._cached_for = {}, metrics
        cache = self._cache.setdefault((pod.cpu_milli, pod.memory), {})
        hosts = metrics.hosts
        out = []
        for n in nodes:
            value = cache.get(n.name)
            if value is None:
                value = cache[n.name] = risk_balancing_score(hosts.get(n.name), n, pod)
            out.append(value)
        return out
