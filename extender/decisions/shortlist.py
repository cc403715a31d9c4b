"""The shortlist: the filter passes only our best nodes, so kube-scheduler scores those.

kube-scheduler runs its score plugins on every node the filter passes and sends every one of
them to prioritize (kubernetes `pkg/scheduler/schedule_one.go`, `prioritizeNodes`). With every
node scored (`percentageOfNodesToScore: 100`, so that we see every feasible node), that is most
of what an extender costs it at 1,000 nodes and more (BENCHMARKS.md, "The shortlist"). The
scheduler's own default scores a sample too (`numFeasibleNodesToFind`: the first few hundred
feasible nodes found); the shortlist is the best nodes by measured load instead. It narrows
only by what was measured: a node without data that passes (a new node, a metric's
`onMissing: fail-open`) goes to the scheduler beside the K, judged by its own plugins.

Scores are 0..10, so many nodes tie at the cut. The tied nodes taken start at a point fixed by
the pod's UID (scoring.tie_start): a retry gets the same list, and a burst spreads over all of
them rather than landing on the first few. No I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Collection, Container, Sequence
from itertools import chain
from operator import itemgetter

from extender.decisions.model import NodeName
from extender.decisions.scoring import tie_start

Ranking = Sequence[tuple[int, NodeName]]
"""Passing nodes as (-score, name), sorted: best first (table.Table.ranking)."""

_name = itemgetter(1)


def shortlist_size(nodes: int, share: float, passing: int) -> int | None:
    """How many nodes to pass: `nodes`, or `share` of the `passing` ones when that is more;
    None when that leaves none out. A share and a floor: in the simulation a fifth placed as
    well as passing every node at 1,000 nodes and 200 did at 500, where 100 (a tenth, a
    fifth) let more nodes run hot (BENCHMARKS.md, "The shortlist")."""
    keep = max(nodes, math.ceil(share * passing))
    return keep if keep < passing else None


def shortlist(
    ranking: Ranking,
    keep: int,
    uid: str,
    asked: Container[NodeName] | None = None,
    skip: Collection[NodeName] = frozenset(),
) -> list[NodeName]:
    """The best `keep` nodes of `ranking` that were `asked` about (None: all of them) and are
    not in `skip`; fewer when fewer qualify. Whole score levels first, then part of the level
    at the cut, taken from the pod's own starting point in it."""
    chosen: list[NodeName] = []
    i, end = 0, len(ranking)
    while i < end and len(chosen) < keep:
        level_end = bisect_left(ranking, (ranking[i][0] + 1,), i)
        size = level_end - i
        start = tie_start(uid, size)
        if asked is None and not skip:  # every node qualifies: slices, no test per node
            need = keep - len(chosen)
            if size <= need:
                chosen += map(_name, ranking[i:level_end])
            else:
                chosen += map(_name, ranking[i + start : min(level_end, i + start + need)])
                chosen += map(_name, ranking[i : i + keep - len(chosen)])  # wrapped
            i = level_end
            continue
        # The level from the pod's start, round to it; tested a name at a time in a
        # comprehension, not a loop (BENCHMARKS.md, "Figures from the code's comments").
        level = chain(ranking[i + start : level_end], ranking[i : i + start])
        if asked is None:
            found = [n for _, n in level if n not in skip]
        elif skip:
            found = [n for _, n in level if n in asked and n not in skip]
        else:
            found = [n for _, n in level if n in asked]
        chosen += found[: keep - len(chosen)]
        i = level_end
    return chosen
