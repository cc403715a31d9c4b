"""The commands that read a running service's JSON document and print it for a person:
`explain` (GET /explain: why a pod went where it went) and `shadow-report` (GET /shadow:
what a running shadow saw), and the node table `scores` prints too (tabulate's layout)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate


def add_to(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    e = sub.add_parser("explain", help="why a pod went where it went (or is still pending)")
    e.add_argument("pod", help="NAMESPACE/NAME (or a UID with --uid)")
    e.add_argument("--uid", action="store_true", help="POD is a pod UID")
    e.add_argument("--url", default="http://127.0.0.1:8888", help="the extender's address")
    e.add_argument("--json", action="store_true", help="print the raw /explain document")
    e.add_argument("--timeout", type=float, default=10.0)
    e.set_defaults(func=explain)
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
    r.set_defaults(func=shadow_report)


def explain(args: argparse.Namespace) -> int:
    query = urllib.parse.urlencode({"uid" if args.uid else "pod": args.pod})
    return _show(args, f"/explain?{query}", explain_text)


def shadow_report(args: argparse.Namespace) -> int:
    query = f"?{urllib.parse.urlencode({'over': args.over})}" if args.over else ""
    return _show(args, f"/shadow{query}", report_text)


def _show(args: argparse.Namespace, path: str, text: Any) -> int:
    """GET a running service's JSON document and print it for a person (or as JSON with
    --json); 1 when there is no answer or an error answer (the cause on stderr)."""
    import aiohttp

    async def get() -> tuple[int, str, bytes]:
        timeout = aiohttp.ClientTimeout(total=args.timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{args.url.rstrip('/')}{path}") as response,
        ):
            return response.status, response.reason or "", await response.read()

    try:
        status, reason, body = asyncio.run(get())
        if status >= 400:
            try:
                message = json.loads(body).get("Error", "")
            except (ValueError, AttributeError):
                message = ""
            print(f"decice-extender {args.command}: {status}: {message or reason}", file=sys.stderr)
            return 1
        doc = json.loads(body)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        cause = str(exc) or type(exc).__name__  # a timeout has no text of its own
        print(f"decice-extender {args.command}: cannot reach {args.url}: {cause}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else text(doc))
    return 0


Row = dict[str, Any]


def node_table(rows: Sequence[Row], placed: str | None = None) -> str:
    """NODE, each metric's value (herd load) and normalised value, SCORE, FILTER."""
    if not rows:
        return "(no node has data)"
    metrics = list(rows[0]["metrics"])
    headers = ["NODE"]
    for m in metrics:
        headers += [m.upper(), "NORM"]
    headers += ["SCORE", "FILTER"]
    body = []
    for r in rows:
        cells = [r["node"]]
        for m in metrics:
            value, norm = r["metrics"][m]["value"], r["metrics"][m]["normalised"]
            load = r["metrics"][m].get("herdLoad") or 0.0
            cells.append(
                "-" if value is None else f"{value:.4g}" + (f" (+{load:.2f})" if load else "")
            )
            cells.append("-" if value is None else "(cand)" if norm is None else f"{norm:.2f}")
        verdict = "pass" if r["passed"] else f"FAIL {r['reason']}"
        if r.get("detail"):
            verdict += f" ({r['detail']})"
        if r["node"] == placed:
            verdict += "  <- placed here"
        body.append([*cells, str(r["score"]), verdict])
    return tabulate(body, headers=headers, tablefmt="plain", disable_numparse=True)


def explain_text(doc: Row) -> str:
    """A decision document (GET /explain) as a heading and the node table."""
    pod = doc["pod"]
    lines = [f"pod {pod['namespace']}/{pod['name']} (uid {pod['uid']}), policy {doc['policy']}"]
    where = f"placed on {doc['placedOn']}" if doc.get("placedOn") else "not placed by us (yet)"
    lines.append(
        f"{where}; decided {doc['secondsAgo']:.0f}s ago; {doc['candidates']} candidates, "
        f"{doc['filtered']} filtered"
    )
    if doc.get("expected"):
        lines.append(f"herd guard: {doc['expected']}")
    for reason, count in (doc.get("filteredBy") or {}).items():
        lines.append(f"  {count} x {reason}")
    if "nodes" not in doc:
        lines.append(doc.get("detail", ""))
        return "\n".join(lines)
    lines.append("")
    lines.append(node_table(doc["nodes"], doc.get("placedOn")))
    if doc.get("omitted"):
        lines.append(f"... {doc['omitted']} more nodes (explain.maxNodes)")
    return "\n".join(lines)


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
    counts = [(label, verdicts.get(verdict, 0)) for label, verdict in VERDICT_LABELS]
    counts += [(f"  {reason}", n) for reason, n in (doc.get("rejected") or {}).items()]
    rows = [(label, f"{_share(n / kept)} ({n})") for label, n in counts]
    over = (doc.get("over") or {}).items()
    rows += [(f"onto nodes over the {metric} threshold", _share(share)) for metric, share in over]
    rows.append(("median score gap (our best - chosen, 0..10)", str(doc.get("medianGap"))))
    lines = [f"placements judged: {seen} (the last {kept} below)", *_aligned(rows)]
    against = doc.get("againstAdvice") or []
    if against:
        chosen = ", ".join(f"{row['node']} ({row['placements']})" for row in against)
        lines.append(f"nodes most often chosen against our advice: {chosen}")
    lines += exceedance_lines(doc.get("exceedance"))
    return "\n".join(lines)


def _aligned(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"  {label.ljust(width)}  {value}" for label, value in rows]


def exceedance_lines(doc: dict[str, Any] | None) -> list[str]:
    """Per verdict and overall, the share of the judged placements whose node went over."""
    if not doc:
        return []
    # "cpu above 0.9" when every policy has that one; else each policy's.
    thresholds: dict[str, str | None] = doc.get("thresholds") or {}
    if len(set(thresholds.values())) == 1 and None not in thresholds.values():
        limit = str(next(iter(thresholds.values())))
    else:
        limit = "; ".join(
            f"{p}: {t or 'no filter.above, not watched'}" for p, t in thresholds.items()
        )
    seconds = doc.get("window", 0)
    window = f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"
    head = f"exceedance: the chosen node over the threshold ({limit}) within {window}"
    rows = [(label, doc["byVerdict"][verdict]) for label, verdict in VERDICT_LABELS]
    rows.append(("all placements", doc["overall"]))
    shares = [(k, f"{_share(r['share'])} ({r['exceeded']} of {r['judged']})") for k, r in rows]
    return [
        f"{head} after, since the start",
        *_aligned(shares),
        f"  not counted: {doc.get('waiting', 0)} in their window still, "
        f"{doc.get('unobserved', 0)} with no fresh data in it, "
        f"{doc.get('dropped', 0)} let go (over shadow.keep)",
    ]
