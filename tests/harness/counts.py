"""Counters the reliability suite reports at the end of a run (fuzz cases, load requests)."""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()
