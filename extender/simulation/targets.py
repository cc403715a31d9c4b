"""The targets the simulation is run against, judged from the report, never tuned for.

On hot node-minutes (above 90 % CPU), means over seeds, ours (decice): no more than any
peer; in every scenario but uniform at least 50 % fewer than kube-scheduler alone; in
uniform no worse than it within noise (the mean paired difference at most two standard
errors; with one seed, <= 0). No pod left unplaced that kube-scheduler placed; no more
pod-wait minutes than a peer that waits for load (WAITING_PEERS), so fewer hot minutes
bought with waiting does not count. A target whose runs are missing is "n/a".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.simulation.profiles import DECICE, KOORDINATOR, PEERS, SHORT
from extender.simulation.summary import ScenarioReport, spread

HOT = "node_minutes_hot"
WAITING_PEERS = (KOORDINATOR,)
"""The peers whose filter turns a pod away for load; the Trimaran plugins only score."""
NO_MORE_THAN = (
    (HOT, "node-minutes above 90% CPU", PEERS, "peer"),
    ("wait_minutes", "pod-wait minutes", WAITING_PEERS, "peer that waits for load"),
)
"""(Metrics field, what the target calls it, the peers ours is held to, what they are)."""
NO_WORSE = "uniform"
NO_WORSE_METRICS = {
    "node_minutes_hot": ("node-minutes above 90%", 1),
    "cpu_p95": ("p95 CPU, pp", 100),
}
"""Metrics field -> (what the verdict calls it, scale for the text)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    target: str
    met: bool | None  # None: the scenario or a scheduler it is about was not run
    detail: str


def halved(sc: ScenarioReport) -> Verdict:
    target = f"{sc.name}: at least 50% fewer node-minutes above 90% CPU than kube-scheduler"
    if sc.baseline is None or sc.ours is None:
        return Verdict(target, None, "kube-scheduler or decice not run")
    base, ours = sc.baseline[HOT].mean, sc.ours[HOT].mean
    if base == 0:
        return Verdict(target, ours == 0, f"kube-scheduler has none, ours {ours:.0f}")
    cut = 1 - ours / base
    change = f"{cut:.1%} fewer" if cut >= 0 else f"{-cut:.1%} more"
    return Verdict(target, cut >= 0.5, f"{base:.0f} -> {ours:.0f} ({change})")


def no_more_than(
    sc: ScenarioReport, key: str, what: str, candidates: Sequence[str], who: str
) -> Verdict:
    target = f"{sc.name}: no more {what} than any {who}"
    peers = [p for p in candidates if p in sc.schedulers]
    if sc.ours is None or not peers:
        return Verdict(target, None, f"decice or every {who} not run")
    ours = sc.ours[key].mean
    listed = ", ".join(f"{SHORT[p]} {sc.schedulers[p][key].mean:.0f}" for p in peers)
    detail = f"ours {ours:.0f}; {listed}"
    fewer = [p for p in peers if sc.schedulers[p][key].mean < ours]
    if fewer:
        detail += f" (fewer: {', '.join(_ahead(sc, p) for p in fewer)})"
    return Verdict(target, not fewer, detail)


def _ahead(sc: ScenarioReport, peer: str) -> str:
    """A peer ahead of ours, with the pods it never placed that kube-scheduler did: what its
    lead cost, which a reader of the verdict alone would not see."""
    left = sc.unplaced_only.get(peer, 0)
    return (
        f"{SHORT[peer]}, which left {left} pods unplaced that kube-scheduler placed"
        if left
        else SHORT[peer]
    )


def no_worse(sc: ScenarioReport) -> Verdict:
    target = f"{sc.name}: no worse than kube-scheduler alone within noise"
    if sc.baseline is None or sc.ours is None:
        return Verdict(target, None, "kube-scheduler or decice not run")
    met = True
    parts = []
    for key, (label, scale) in NO_WORSE_METRICS.items():
        # ours - kube-scheduler seed by seed: its mean against two standard errors
        pairs = zip(sc.baseline[key].values, sc.ours[key].values, strict=True)
        diffs = spread([o - b for b, o in pairs])
        mean, n = diffs.mean, len(diffs.values)
        se = diffs.sd / math.sqrt(n) if n > 1 else None
        bound = 0.0 if se is None else 2 * se
        met = met and mean <= bound
        noise = "1 seed: no noise estimate" if se is None else f"2 SE {scale * bound:.1f}"
        parts.append(f"{label} ours - kube-scheduler {scale * mean:+.1f} ({noise})")
    return Verdict(target, met, "; ".join(parts))


def nobody_left_behind(scenarios: Sequence[ScenarioReport]) -> Verdict:
    target = "no pod left unplaced that kube-scheduler alone placed"
    judged = [sc for sc in scenarios if DECICE in sc.unplaced_only]
    if not judged:
        return Verdict(target, None if scenarios else True, "kube-scheduler or decice not run")
    worst = {sc.name: sc.unplaced_only[DECICE] for sc in judged if sc.unplaced_only[DECICE]}
    if not worst:
        return Verdict(target, True, "none, in every scenario and seed")
    listed = ", ".join(f"{name} {n}" for name, n in worst.items())
    return Verdict(target, False, f"pods only ours left waiting: {listed}")


def judge(scenarios: Sequence[ScenarioReport]) -> list[Verdict]:
    by_name: Mapping[str, ScenarioReport] = {sc.name: sc for sc in scenarios}
    out = [no_more_than(sc, *compared) for compared in NO_MORE_THAN for sc in scenarios]
    out += [halved(sc) for sc in scenarios if sc.name != NO_WORSE]
    sc = by_name.get(NO_WORSE)
    out.append(no_worse(sc) if sc else Verdict(f"{NO_WORSE}: no worse", None, "not run"))
    out.append(nobody_left_behind(scenarios))
    return out
