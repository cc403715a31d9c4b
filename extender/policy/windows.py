"""The rate window W a metric's PromQL averages over: a rate shows a pod started t seconds
ago by t / W of its use. Where windows combine, the larger of two rates (`max`, `or`) shows
a rise in the shortest; any other combination takes the longest (never too early)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import promql_parser

from extender.policy.settings import Settings

INSTANT_FUNCTIONS = frozenset({"irate", "idelta"})
"""Functions of the last two samples only: a pod shows whole one scrape after it starts."""
_RULE_SUFFIX = re.compile(r"(?:^|_)(i?rate|increase)(\d+(?:ms|[smhdwy]))?$")
PROMETHEUS_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
PROMETHEUS_UNITS |= {"y": 31536000, "M": 31 * 86400}  # M: VictoriaMetrics' months
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 0.001, "s": 1}
GO_UNITS |= {"m": 60, "h": 3600}  # Go's time.ParseDuration: no days, micro as us, µs or μs


@dataclass(frozen=True, slots=True)
class Window:
    seconds: float
    """0: the metric shows a pod whole once it shows it at all (no averaging window)."""
    why: str
    """Where the figure comes from, for check-config, doctor and /readyz."""

    def fade(self, settle: float) -> str:
        """How a placed pod's reservation ends: whole for `settle` s, then fading."""
        fade = f"then fading over {self.seconds:g}s" if self.seconds else "then gone at once"
        return f"whole for {settle:g}s, {fade}"


def duration(text: str, units: dict[str, float] = PROMETHEUS_UNITS) -> float | None:
    """Seconds of a duration with units ("1h30m"; Prometheus' by default), or None."""
    unit = "|".join(sorted(units, key=len, reverse=True))
    part = rf"(\d+(?:\.\d+)?)({unit})"
    if not re.fullmatch(f"(?:{part})+", text):
        return None
    return sum(float(n) * units[u] for n, u in re.findall(part, text))


def rule_window(name: str) -> float | None:
    """The window a recording rule's name promises (`:rate5m`; `:sum_irate` is 0), or None."""
    last = name.rsplit(":", 1)[-1]
    match = _RULE_SUFFIX.search(last)
    if match is None:
        return None
    if match.group(1) == "irate":
        return 0.0
    return duration(match.group(2)) if match.group(2) else None


def query_window(query: str) -> Window:
    """The window of one metric's query (see the module's docstring)."""
    try:
        tree = promql_parser.parse(query)
    except (ValueError, TypeError):
        return Window(0.0, "no window: the query does not parse")
    found = _window(tree, larger_wins=True)
    if found is None:
        return Window(0.0, "no rate window in the query: a pod shows whole once it shows")
    return Window(*found)


def _window(node: Any, larger_wins: bool) -> tuple[float, str] | None:
    """(seconds, why) of an expression's window, or None when it has none."""
    if isinstance(node, promql_parser.MatrixSelector):
        ranged = _seconds(node.range)
        return ranged, f"{_text(ranged)} from [{_text(ranged)}] in the query"
    if isinstance(node, promql_parser.VectorSelector):
        named = rule_window(node.name or "")
        if named is None:
            return None
        return named, f"{_text(named)} from the recording rule {node.name}"
    if isinstance(node, promql_parser.SubqueryExpr):
        ranged = _seconds(node.range)
        subquery = (ranged, f"{_text(ranged)} from a subquery range")
        return _longest([_window(node.expr, larger_wins), subquery])
    if isinstance(node, promql_parser.Call):
        if node.func.name in INSTANT_FUNCTIONS:
            return 0.0, f"0s: {node.func.name} reads the last two samples only"
        return _longest([_window(a, larger_wins) for a in node.args])
    if isinstance(node, promql_parser.AggregateExpr):
        keeps_larger = str(node.op) in ("max", "topk")
        return _window(node.expr, larger_wins and keeps_larger)
    if isinstance(node, promql_parser.BinaryExpr):
        sides = [_window(node.lhs, larger_wins), _window(node.rhs, larger_wins)]
        if str(node.op) == "or" and larger_wins:
            return _longest(sides, shortest=True)
        return _longest(sides)
    if isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return _window(node.expr, larger_wins)
    return None


def _seconds(delta: Any) -> float:
    return float(delta.total_seconds()) if delta is not None else 0.0


def _longest(
    found: list[tuple[float, str] | None], shortest: bool = False
) -> tuple[float, str] | None:
    present = [f for f in found if f is not None]
    if not present:
        return None
    best = (min if shortest else max)(present, key=lambda f: f[0])
    seconds = sorted({f[0] for f in present})
    if len(seconds) == 1:
        return best
    listed = ", ".join(map(_text, seconds))
    kept = "the larger of them is kept, so a rise shows in the fastest"
    why = (
        f"the shortest of {listed} ({kept})"
        if shortest
        else f"the longest of {listed} (they are combined)"
    )
    return best[0], f"{best[1]}: {why}"


def _text(seconds: float) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def herd_window(settings: Settings) -> Window:
    """`herdGuard.window`, else the longest of the herd metrics' windows (one ledger
    serves every policy)."""
    guard = settings.herd_guard
    if guard.window is not None:
        return Window(guard.window, f"{_text(guard.window)} from herdGuard.window")
    if settings.provider == "static":
        return Window(0.0, "no window: the static provider's values never move")
    queries = {
        m.name: m.query
        for p in settings.policy_map.values()
        for m in p.metrics
        if m.name == p.herd_metric
    }
    if not queries:
        return Window(0.0, "no herd metric")
    windows = {name: query_window(q) for name, q in queries.items()}
    name, longest = max(windows.items(), key=lambda item: item[1].seconds)
    if len(windows) == 1:
        return longest
    return Window(longest.seconds, f"{longest.why} (metric {name}, the longest of the policies')")
