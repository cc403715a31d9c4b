"""Pods the herd guard holds as they change before the metric shows them: expected on the
node our prioritize answer ranks first, nominated to a node (kube-scheduler keeps the room
for a preemptor there), or resized in place (one landed: DecisionState.reserve).

`HeldPods` adds these to the state (state.DecisionState); the pod watch (cluster.podwatch),
/prioritize and /preempt (engine.Engine) tell them. Pure: `now` is passed in.
"""

from __future__ import annotations

from extender.decisions.model import NodeName
from extender.decisions.pods import PodFacts
from extender.decisions.state import EXPECTED, NOMINATED, DecisionState

TENTATIVE_SECONDS = 2.0
"""How long a nomination /preempt expects waits for the pod watch to show it: the
scheduler writes it within milliseconds of asking /preempt, the watch shows it a batch
(0.1 s) later; a pod it never nominates (another extender dropped the node, the
preemption failed, or /preempt was asked about a pod that does not exist) holds the room
no longer."""


class HeldPods(DecisionState):
    def nominate(
        self, uid: str, node: NodeName, pod: PodFacts, now: float, *, tentative: bool = False
    ) -> bool:
        """Count a pod nominated to `node` (`status.nominatedNodeName`, no node yet) there, as
        placed a moment ago: kube-scheduler keeps that room for it, and a pod our filter
        would send elsewhere must not take it first. A pod nominated elsewhere now moves;
        its own filter does not count it against its node (Engine._cleared_for_preemptor).
        Like kube-scheduler's nominator, but for pods of every priority (it counts only
        those of equal or higher priority than the pod it filters). `tentative`: expected
        from /preempt before the pod watch shows it (TENTATIVE_SECONDS)."""
        if tentative:
            self._tentative[uid] = now + TENTATIVE_SECONDS
        else:
            self._tentative.pop(uid, None)  # the pod watch confirms it
        held = self._herd.reservations.get(uid)
        if held is not None and held.source == EXPECTED:
            self.unexpect(uid, now)  # nominated: the scheduler says where, not our guess
        elif held is not None:
            if held.source != NOMINATED or held.node == node:
                return False
            self.release(uid, now)
        counted = self.reserve(uid, node, pod.cpu_request, now, NOMINATED, pod=pod)
        self.nominations(uid, counted)
        return counted

    def unnominate(self, uid: str, now: float) -> bool:
        """The pod is nominated to no node any more (the scheduler cleared it after a failed
        attempt, or a gang's members were rolled back): its room is free again."""
        self._tentative.pop(uid, None)
        held = self._herd.reservations.get(uid)
        if held is None or held.source != NOMINATED:
            return False
        self.nominations(uid, False)
        return self.release(uid, now)

    @property
    def expecting(self) -> bool:
        """No bind of ours follows our answers (`bind.enabled: false`: the scheduler's own
        binder binds), so the herd guard learns where a pod went from the pod watch alone.
        kube-scheduler decides a burst far faster than the watch shows its Bindings
        (BENCHMARKS.md, "Figures from the code's comments"). So each pod is counted where
        we let it go, as it is decided (`expect`)."""
        return not self.settings.bind.enabled and self.settings.herd_guarded

    @property
    def unconfirmed(self) -> bool:
        """Pods are counted where we expect them and not seen bound yet: the filter then
        passes only our best node (Engine._shortlisted), so the next pod of the burst goes
        where it is counted: a guess among several nodes is wrong whenever the scheduler's
        own plugins or its pick among equal totals disagree, and overfills that node."""
        return bool(self._expected)

    def expect(self, uid: str, node: NodeName, pod: PodFacts, now: float) -> bool:
        """Count a pod on `node` as placed now: the one node our filter passed it (while
        a burst is unconfirmed), else the one our prioritize answer ranks first. Our bind or
        the pod watch then confirms it there or moves it where the scheduler sent it
        (state.DecisionState.reserve); the pod's next filter call (a retry) drops it, and
        so does `herdGuard.settle` without news: by then a pod bound at once would begin to
        show in the metric, and a pod bound later is counted from its bind by the watch."""
        held = self._herd.reservations.get(uid)
        if held is not None:
            if held.source != EXPECTED or held.node == node:
                return False  # bound or nominated (known for sure), or expected there
            self.release(uid, now)
        self._expected.pop(uid, None)
        self._expected[uid] = now + self.settings.herd_guard.settle
        return self.reserve(uid, node, pod.cpu_request, now, EXPECTED, pod=pod)

    def unexpect(self, uid: str, now: float) -> bool:
        """The pod is being scheduled again (a retry after a failed bind), or its
        expectation ran out: what we expected of it is void."""
        if self._expected.pop(uid, None) is None:
            return False
        held = self._herd.reservations.get(uid)
        return held is not None and held.source == EXPECTED and self.release(uid, now)

    def expire_tentative(self, now: float) -> None:
        """Free the headroom held by tentative nominations the pod watch never confirmed, and by
        expectations no bind followed. O(1) while there are none (the verbs call it)."""
        expected = self._expected
        while expected:
            uid, until = next(iter(expected.items()))
            if now < until:
                break
            self.unexpect(uid, now)
        for uid in [u for u, until in self._tentative.items() if now >= until]:
            self.unnominate(uid, now)

    def resized(self, uid: str, pod: PodFacts, now: float) -> bool:
        """A held pod's CPU request changed (an in-place resize, or its pod-level resources):
        it counts at what it is expected to use now, from when it was placed (a reservation
        from measured use does not move with its request)."""
        held = self._herd.reservations.get(uid)
        if held is None:
            return False
        expected = self.guard.expected(pod, self._snapshot, now)
        if abs(expected.cores - held.cores) < 1e-9:
            return False
        self.release(uid, now)
        return self.reserve(
            uid, held.node, pod.cpu_request, now, held.source, pod=pod, assigned_at=held.bound_at
        )
