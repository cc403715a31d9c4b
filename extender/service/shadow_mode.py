"""The shadow mode of the service: judge every placement the cluster's schedulers make,
from the pod watch, against the table of that moment, and change nothing.

Same refresher, engine, node and pod watches as the extender; no verbs, no bind, no Events,
no patches: read-only RBAC (list and watch pods and nodes). Each recent assignment the
pod watch sees, of a selected pod (`shadow:` settings), is judged before the herd guard
counts it (decisions.shadow), recorded in a bounded ring for the summary (`GET /shadow`,
`decice-extender shadow-report`), counted in /metrics, and remembered for /explain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from extender.decisions.assignments import Assigned
from extender.decisions.eligibility import read_eligibility
from extender.decisions.engine import Engine
from extender.decisions.nodes import NodeCache
from extender.decisions.pods import PodMemo, read_pod
from extender.decisions.resources import PodError
from extender.decisions.shadow import Assignment, ShadowLog, covers, judge
from extender.policy.settings import Settings


class Judged(Protocol):
    def judged(self, policy: str, verdict: str, gap: int, reason: str | None) -> None: ...


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

    def __init__(self, engine: Engine, nodes: NodeCache, counter: Judged) -> None:
        self._engine = engine
        self._nodes = nodes
        self._counter = counter
        self.log = ShadowLog(engine.settings.shadow.keep)
        self._latest: dict[str, Assignment] = {}
        """uid -> its judgement, for /explain (bounded like the engine's pod memory)."""

    def __call__(self, assigned: Assigned, pod: Any, now: float) -> None:
        engine = self._engine
        if not covers(engine.settings.shadow, pod):
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
        verdict = judge(table, assigned.node, lambda n: eligibility.allows(nodes.get(n)))
        snapshot = engine.snapshot
        values = {
            name: series.values.get(assigned.node) for name, series in snapshot.metrics.items()
        }
        record = Assignment(
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
        self._latest[facts.uid] = record
        while len(self._latest) > engine.settings.explain.keep_pods:
            del self._latest[next(iter(self._latest))]
        self._counter.judged(policy.name, verdict.verdict, verdict.gap, verdict.reason)
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

    def explain(self, uid: str) -> Mapping[str, object] | None:
        """/explain's shadow section of a judged pod: where we would have put it, and why."""
        record = self._latest.get(uid)
        if record is None:
            return None
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
        }

    def summary(self, over: Mapping[str, float] | None = None) -> dict[str, object]:
        """`GET /shadow`: over each metric's filter threshold unless `over` says."""
        if over is None:
            over = {
                m.name: m.filter.above
                for p in self._engine.settings.policy_map.values()
                for m in p.metrics
                if m.filter is not None and m.filter.above is not None
            }
        return self.log.summary(over)
