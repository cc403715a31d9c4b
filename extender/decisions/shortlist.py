"""The shortlist: the filter passes only our best nodes, so kube-scheduler scores those.

kube-scheduler scores every node the filter passes and sends each to prioritize (kubernetes
`pkg/scheduler/schedule_one.go`, `prioritizeNodes`): most of what an extender costs it
(BENCHMARKS.md, "The shortlist"). A node without data that passes goes beside them; ties
at the cut start at a point fixed by the pod's UID, so a burst spreads over them. Pure.
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
    """How many nodes to pass: `nodes`, or `share` of the `passing` ones when that is more
    (BENCHMARKS.md, "The shortlist"); None when that leaves none out."""
    keep = max(nodes, math.ceil(share * passing))
    return keep if keep < passing else None


def shortlist(
    ranking: Ranking,
    keep: int,
    uid: str,
    asked: Container[NodeName] | None = None,
    skip: Collection[NodeName] = frozenset(),
) -> list[NodeName]:
    """The best `keep` nodes of `ranking` that were `asked` about (None: all) and are not in
    `skip`: whole score levels first, then the level at the cut from the pod's own start."""
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
        # The level from the pod's start, round to it (a comprehension per case: BENCHMARKS.md).
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
