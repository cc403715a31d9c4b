"""The doctor's report: one row per check (ok / warn / FAIL with the likely cause)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from tabulate import tabulate

Status = Literal["ok", "warn", "FAIL"]


@dataclass(frozen=True, slots=True)
class Row:
    check: str
    status: Status
    detail: str


def few(items: Iterable[str], n: int = 3) -> str:
    listed = sorted(set(items))
    more = f" (+{len(listed) - n} more)" if len(listed) > n else ""
    return ", ".join(listed[:n]) + more


def render(rows: Sequence[Row]) -> str:
    """CHECK, STATUS, DETAIL, then a one-line summary."""
    table = tabulate(
        [[r.check, r.status, r.detail] for r in rows],
        headers=["CHECK", "STATUS", "DETAIL"],
        tablefmt="plain",
        disable_numparse=True,
    )
    n = Counter(r.status for r in rows)
    return f"{table}\n\n{n['FAIL']} FAIL, {n['warn']} warn, {n['ok']} ok"


def exit_code(rows: Iterable[Row]) -> int:
    return 1 if any(r.status == "FAIL" for r in rows) else 0
