"""Medians (and spread) over several `bench.py --json` runs, as Markdown for BENCHMARKS.md.

python -m tests.benchmarks.summary run1.json run2.json run3.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.benchmarks.bench import TARGETS

COLUMNS = (
    ("server_p50_ms", "server p50 ms", 3),
    ("server_p99_ms", "server p99 ms", 3),
    ("rtt_p50_ms", "rtt p50 ms", 3),
    ("rtt_p99_ms", "rtt p99 ms", 3),
    ("rps_c1", "rps c1", 0),
    ("rps_c4", "rps c4", 0),
    ("floor_orjson_ms", "orjson floor ms", 3),
    ("floor_echo_ms", "echo rtt ms", 3),
    ("floor_echo_rps_c1", "echo rps c1", 0),
    ("ratio_orjson", "ratio_orjson", 2),
    ("ratio_echo", "ratio_echo", 2),
    ("ratio_rps", "ratio_rps", 2),
)


def fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def median_cell(values: Sequence[float | None], digits: int, spread: bool) -> str:
    xs = [v for v in values if v is not None]
    if not xs:
        return "-"
    text = fmt(statistics.median(xs), digits)
    if spread and len(xs) > 1:
        text += f" ({fmt(min(xs), digits)}-{fmt(max(xs), digits)})"
    return text


def summarise(runs: Sequence[dict[str, Any]]) -> str:
    keys = [(r["verb"], r["form"], r["nodes"]) for r in runs[0]["results"]]
    rows = {
        k: [
            next(r for r in run["results"] if (r["verb"], r["form"], r["nodes"]) == k)
            for run in runs
        ]
        for k in keys
    }
    out = [f"Medians of {len(runs)} runs; (min-max) for the ratios.", ""]
    head = ["verb", "form", "nodes", *(title for _, title, _ in COLUMNS), "bytes", "hosts"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for (verb, form, nodes), same in rows.items():
        cells = [verb, form, str(nodes)]
        for key, _, digits in COLUMNS:
            cells.append(median_cell([r[key] for r in same], digits, key.startswith("ratio")))
        cells += [str(same[0]["answer_bytes"]), str(same[0]["answer_hosts"])]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "| target | median (min-max) | verdict |", "|---|---|---|"]
    for verb, form, nodes, key, limit in TARGETS:
        found = rows.get((verb, form, nodes)) or []
        xs = [r[key] for r in found if r[key] is not None]
        if not xs:
            continue
        m = statistics.median(xs)
        verdict = "met" if m <= limit else f"missed by {m / limit - 1:.0%}"
        out.append(
            f"| {verb} {form} {nodes}: {key} <= {limit} | "
            f"{m:.2f} ({min(xs):.2f}-{max(xs):.2f}) | {verdict} |"
        )
    rss = [run["rss_mb"] for run in runs]
    out += ["", "| RSS MB (5,000-node service) | median (min-max) |", "|---|---|"]
    for key, title in (
        ("idle", "idle, snapshot loaded"),
        ("warm", "warm, after the NodeNames rows"),
        ("after", "10,000 NodeNames requests after warm"),
        ("after_all_forms", "after the full-Nodes rows too"),
    ):
        xs = [r[key] for r in rss if r.get(key) is not None]
        if xs:
            out.append(f"| {title} | {median_cell(xs, 1, True)} |")
    return "\n".join(out)


def main(argv: Sequence[str]) -> int:
    runs = [json.loads(Path(p).read_text()) for p in argv]
    if not runs:
        print(__doc__, file=sys.stderr)
        return 2
    print(summarise(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
