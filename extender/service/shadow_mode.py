"""The shadow mode of the service: judge every placement the cluster's schedulers make,
from the pod watch, against the table of that moment (decisions.shadow), and change
nothing. Each is kept for `GET /shadow`, counted in /metrics, remembered for /explain and
watched for exceedance within `shadow.exceedanceWindow`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from extender.decisions import shadow
from extender.decisions.assignments import Assigned
from extender.decisions.engine import Engine
from extender.decisions.nodes import NodeCache, read_eligibility
from extender.decisions.pods import PodMemo, read_pod
from extender.decisions.resources import PodError
from extender.policy.settings import Settings


def for_shadowing(settings: Settings) -> Settings:
    """The shadow's view of the policy: it binds nothing, posts nothing, patches nothing."""
    return settings.model_copy(
        update={
            "bind": settings.bind.model_copy(update={"enabled": False}),
            "explain": settings.explain.model_copy(update={"events": False}),
            "requeue": settings.requeue.model_copy(update={"enabled": False}),
        }
    )


class ShadowObserver:
    """The pod watch's `seen` hook in shadow mode."""

    def __init__(
        self,
        engine: Engine,
        nodes: NodeCache,
        judged: Callable[[str, str, int, str | None], object],
    ) -> None:
        self._engine = engine
        self._nodes = nodes
        self._judged = judged
        self.log = shadow.ShadowLog(engine.settings.shadow.keep)
        self.exceedances = shadow.Exceedances(engine.settings.shadow.keep)
        self._latest: dict[str, tuple[shadow.Assignment, shadow.Watch | None]] = {}
        """uid -> its judgement and watch, for /explain (bounded like the pod memory)."""

    def __call__(self, assigned: Assigned, pod: Any, now: float) -> None:
        engine = self._engine
        if not shadow.covers(engine.settings.shadow, pod):
            return
        try:
            facts = read_pod(pod)
        except PodError:
            return
        policy = engine.policy_of(facts)
        if policy is None:
            return  # it names a policy we do not have: nothing to judge it by
        table = engine.table(now, policy)
        eligibility = read_eligibility(pod)
        nodes = self._nodes
        verdict = shadow.judge(table, assigned.node, lambda n: eligibility.allows(nodes.get(n)))
        snapshot = engine.snapshot
        values = {
            name: series.values.get(assigned.node) for name, series in snapshot.metrics.items()
        }
        record = shadow.Assignment(
            facts.namespace,
            facts.name,
            policy.name,
            facts.scheduler_name,
            assigned.node,
            verdict,
            values,
            now,
        )
        self.log.add(record)
        threshold = shadow.threshold_of(policy)
        watch = None
        if threshold is not None:
            window = engine.settings.shadow.exceedance_window
            watch = self.exceedances.placed(
                assigned.node, policy.name, verdict.verdict, threshold, now, window
            )
        self._latest[facts.uid] = (record, watch)
        while len(self._latest) > engine.settings.explain.keep_pods:
            del self._latest[next(iter(self._latest))]
        self._judged(policy.name, verdict.verdict, verdict.gap, verdict.reason)
        engine.pods.remember(
            PodMemo(
                facts=facts,
                rejected=frozenset(table.reasons),
                asked=len(table.evals),
                at=now,
                snapshot=snapshot,
                stale=table.stale,
                herd=table.herd,
                node=assigned.node,
                policy=policy,
            )
        )

    def exceedance_counts(self) -> dict[tuple[str, str, str], int]:
        """/metrics: a zero for each of the policies in force (the share's divisor exists
        from the start)."""
        return shadow.every_count(self._engine.settings.policy_map, self.exceedances.counts)

    def explain(self, uid: str) -> Mapping[str, object] | None:
        """/explain's shadow section: where we would have put the pod, and why; and
        whether its node went over the threshold within the window."""
        latest = self._latest.get(uid)
        if latest is None:
            return None
        record, watch = latest
        j = record.judgement
        return {
            "verdict": j.verdict,
            "chosen": record.node,
            "chosenScore": j.chosen_score,
            "ourBest": j.best,
            "ourBestScore": j.best_score,
            "gap": j.gap,
            "rejectedBecause": j.reason,
            "scheduler": record.scheduler,
            "exceedance": None if watch is None else watch.detail(),
        }

    def summary(self, over: Mapping[str, float] | None = None) -> dict[str, object]:
        """`GET /shadow`: over each metric's filter threshold unless `over` says."""
        policies = self._engine.settings.policy_map
        if over is None:
            over = {
                m.name: m.filter.above
                for p in policies.values()
                for m in p.metrics
                if m.filter is not None and m.filter.above is not None
            }
        doc = self.log.summary(over)
        thresholds = {name: shadow.threshold_of(p) for name, p in policies.items()}
        window = self._engine.settings.shadow.exceedance_window
        doc["exceedance"] = self.exceedances.summary(thresholds, window)
        return doc
