"""`decice-extender shadow-report`: what a running shadow saw, for a person: placements,
agreement with our advice, placements onto nodes over a threshold, the median score gap,
the nodes most often chosen against our advice, and per verdict how often the chosen node
went over the threshold within the window after (exceedance)."""

from __future__ import annotations

import argparse
import json
import urllib.parse
from typing import Any

from extender.cli.common import fetch_json


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = sub.add_parser("shadow-report", help="summarise what a running shadow saw")
    r.add_argument("--url", default="http://127.0.0.1:8889", help="the shadow's address")
    r.add_argument(
        "--over",
        metavar="METRIC=VALUE[,...]",
        help="share of placements onto nodes above these values (default: each metric's "
        "filter threshold)",
    )
    r.add_argument("--json", action="store_true", help="print the raw /shadow document")
    r.add_argument("--timeout", type=float, default=10.0)
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    query = f"?{urllib.parse.urlencode({'over': args.over})}" if args.over else ""
    doc = fetch_json(f"{args.url.rstrip('/')}/shadow{query}", args.timeout, "shadow-report")
    if doc is None:
        return 1
    print(json.dumps(doc, indent=2) if args.json else report_text(doc))
    return 0


VERDICT_LABELS = (
    ("on our best node", "best"),
    ("in our top 3 (not the best)", "top3"),
    ("on another node our filter passes", "other"),
    ("on a node our filter rejects", "rejected"),
)


def _share(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def report_text(doc: dict[str, Any]) -> str:
    """The /shadow document as lines a person reads."""
    kept, seen = doc.get("kept", 0), doc.get("seen", 0)
    if not kept:
        return f"placements judged: {seen}\nnothing to report yet"
    verdicts = doc.get("verdicts", {})
    rows: list[tuple[str, str]] = []
    for label, verdict in VERDICT_LABELS:
        count = verdicts.get(verdict, 0)
        rows.append((label, f"{_share(count / kept)} ({count})"))
    for reason, count in (doc.get("rejected") or {}).items():
        rows.append((f"  {reason}", f"{_share(count / kept)} ({count})"))
    for metric, share in (doc.get("over") or {}).items():
        rows.append((f"onto nodes over the {metric} threshold", _share(share)))
    rows.append(("median score gap (our best - chosen, 0..10)", str(doc.get("medianGap"))))
    width = max(len(label) for label, _ in rows)
    lines = [f"placements judged: {seen} (the last {kept} below)"]
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    against = doc.get("againstAdvice") or []
    if against:
        chosen = ", ".join(f"{row['node']} ({row['placements']})" for row in against)
        lines.append(f"nodes most often chosen against our advice: {chosen}")
    lines += exceedance_lines(doc.get("exceedance"))
    return "\n".join(lines)


def _window(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"


def _thresholds(thresholds: dict[str, str | None]) -> str:
    """ "cpu above 0.9" when every policy has that one; else each policy's."""
    if len(set(thresholds.values())) == 1 and None not in thresholds.values():
        return str(next(iter(thresholds.values())))
    return "; ".join(f"{p}: {t or 'no filter.above, not watched'}" for p, t in thresholds.items())


def exceedance_lines(doc: dict[str, Any] | None) -> list[str]:
    """The exceedance block: per verdict and overall, the share of the placements whose
    window closed (or whose node went over) that saw the node over the threshold."""
    if not doc:
        return []
    head = (
        f"exceedance: the chosen node over the threshold "
        f"({_thresholds(doc.get('thresholds') or {})}) within {_window(doc.get('window', 0))}"
        " after, since the start"
    )
    rows = [(label, doc["byVerdict"][verdict]) for label, verdict in VERDICT_LABELS]
    rows.append(("all placements", doc["overall"]))
    width = max(len(label) for label, _ in rows)
    lines = [head]
    for label, row in rows:
        lines.append(
            f"  {label.ljust(width)}  {_share(row['share'])} ({row['exceeded']} of {row['judged']})"
        )
    lines.append(
        f"  not counted: {doc.get('waiting', 0)} in their window still, "
        f"{doc.get('unobserved', 0)} with no fresh data in it, "
        f"{doc.get('dropped', 0)} let go (over shadow.keep)"
    )
    return lines
