"""Terminal tables for people: `decice-extender scores` and `decice-extender explain`.

Both print the rows of extender.decisions.explain (best score first) through one renderer, so a
node reads the same in both; tabulate does the layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

Row = dict[str, Any]


def _value(cell: Row) -> str:
    value = cell["value"]
    if value is None:
        return "-"
    load = cell.get("herdLoad") or 0.0
    return f"{value:.4g}" + (f" (+{load:.2f})" if load else "")


def _norm(cell: Row) -> str:
    norm = cell["normalised"]
    if norm is not None:
        return f"{norm:.2f}"
    return "-" if cell["value"] is None else "(cand)"


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
            cells += [_value(r["metrics"][m]), _norm(r["metrics"][m])]
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
