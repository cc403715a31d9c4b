"""In-process costs of the request path's pieces that the code's comments argue from.

    python -m tests.benchmarks.pathcosts [--nodes 5000] [--runs 3] [--quick]

Comments in extender/ say why a piece is shaped as it is ("one C-level set check instead
of a lookup per name"), and point here for the figures, so numbers live in BENCHMARKS.md
and can be measured again. Each row times one piece on `--nodes` fresh cloud-style names
(as decoded from a request: strings the process has not hashed yet), in this process, and
prints the median of `--runs` runs of a bounded loop. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from extender.decisions.turnedaway import NameDigest
from tests.benchmarks.bench import node_names, request_body


def _fresh(names: list[str]) -> list[str]:
    """The same names as new, unhashed string objects (what decoding a request gives)."""
    fresh: list[str] = orjson.loads(orjson.dumps(names))
    return fresh


def _non_empty_strings(names: list[str]) -> bool:
    """The names check wire.py made before msgspec typed the names (BENCHMARKS.md, "One
    wire schema"): a join fails on a non-string, `all` on an empty one."""
    try:
        "".join(names)
    except TypeError:
        return False
    return all(names)


def per_call_us(
    setup: Callable[[], Any], piece: Callable[[Any], object], loops: int, seconds: float
) -> float:
    """Median microseconds of `piece(setup())` over at most `loops` calls or `seconds`;
    the setup is not timed."""
    times: list[float] = []
    deadline = time.monotonic() + seconds
    while len(times) < loops and time.monotonic() < deadline:
        arg = setup()
        start = time.perf_counter()
        piece(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def rows(n: int, loops: int, seconds: float) -> dict[str, float]:
    names = node_names(n)
    known = frozenset(names)
    names_body = request_body(names, "names")
    nodes_body = request_body(names, "nodes")

    def fresh() -> list[str]:
        return _fresh(names)

    def decode_paused(body: bytes) -> None:
        gc.disable()
        try:
            orjson.loads(body)
        finally:
            gc.enable()

    out = {
        f"decode a {n:,}-name request (orjson)": per_call_us(
            lambda: names_body, orjson.loads, loops, seconds
        ),
        f"check {n:,} names are non-empty strings (two C-level passes)": per_call_us(
            fresh, _non_empty_strings, loops, seconds
        ),
        f"one set check of {n:,} fresh names (frozenset.issuperset)": per_call_us(
            fresh, known.issuperset, loops, seconds
        ),
        f"the nodes a {n:,}-name call left out (two set passes)": per_call_us(
            fresh, lambda ns: known - set(ns), loops, seconds
        ),
        f"a digest of {n:,} fresh names (turnedaway.NameDigest)": per_call_us(
            fresh, NameDigest, loops, seconds
        ),
    }
    slow_loops = max(3, loops // 100)
    out[f"decode {n:,} full Nodes ({len(nodes_body) / 1e6:.0f} MB), collector on"] = per_call_us(
        lambda: nodes_body, orjson.loads, slow_loops, seconds * 5
    )
    out[f"decode {n:,} full Nodes ({len(nodes_body) / 1e6:.0f} MB), collector paused"] = (
        per_call_us(lambda: nodes_body, decode_paused, slow_loops, seconds * 5)
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="100 names, short loops")
    args = p.parse_args(argv)
    n, loops, seconds = (100, 50, 0.2) if args.quick else (args.nodes, 500, 2.0)
    runs = [rows(n, loops, seconds) for _ in range(args.runs)]
    width = max(map(len, runs[0]))
    print(f"{'piece':<{width}}  median us (runs)")
    for key in runs[0]:
        values = [r[key] for r in runs]
        spread = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{key:<{width}}  {statistics.median(values):>10,.1f}  ({spread})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
