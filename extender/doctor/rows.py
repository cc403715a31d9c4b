"""The doctor's report: one row per check (ok / warn / FAIL with the likely cause)."""

from __future__ import annotations

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
    failed = sum(r.status == "FAIL" for r in rows)
    warned = sum(r.status == "warn" for r in rows)
    summary = f"{failed} FAIL, {warned} warn, {len(rows) - failed - warned} ok"
    return f"{table}\n\n{summary}"


def exit_code(rows: Iterable[Row]) -> int:
    return 1 if any(r.status == "FAIL" for r in rows) else 0
