"""Our CPU quantity parse (extender.decisions.pods.cpu_cores) against the `kubernetes`
package's `kubernetes.utils.parse_quantity`, on the request path's inputs.

    python -m tests.benchmarks.quantities [--runs 3] [--quick]

A filter call reads the pod's CPU request once (PodFacts), so each row is one pod's worth
of quantities: the captured scheduler pod's requests, and a spread of real-world forms
("100m", "0.5", "2", "1500m", "250m", "1", "4", "3500m"). Rows: ours as the request path
calls it (its lru_cache warm, as in a running service), ours uncached, the library
uncached (with the same checks ours makes after it: finite, not negative, as a float).
Then the inputs on which the two disagree. Prints medians of `--runs` bounded loops, in
one process; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from decimal import Decimal

import kubernetes.utils

from extender.decisions.resources import cpu_cores

FORMS = ("100m", "0.5", "2", "1500m", "250m", "1", "4", "3500m")
ODD = (
    "1e3", "5e-1", "1E3", "1Ki", "500u", "0.1k", "+1", "-1", "1.", ".5", " 1 ", "1 m", "m",
    "", "1mm", "1ki", "Infinity", "NaN", "1_000", "1e400", "0x10", "\u0661",  # an Arabic-Indic one
)  # fmt: skip
"""Forms a request may carry that the two parsers might read differently."""

_uncached: Callable[[str], float | None] = cpu_cores.__wrapped__
parse_quantity: Callable[[str], Decimal] = kubernetes.utils.parse_quantity


def library_cores(quantity: str) -> float | None:
    """`kubernetes.utils.parse_quantity` with the checks `cpu_cores` makes after parsing."""
    try:
        value: Decimal = parse_quantity(quantity)
    except (ValueError, ArithmeticError):
        return None
    if not value.is_finite() or value < 0:
        return None
    cores = float(value)
    return cores if math.isfinite(cores) else None


def per_pod_us(parse: Callable[[str], object], forms: Sequence[str], seconds: float) -> float:
    """Median microseconds to parse every quantity of `forms` once (one pod's worth)."""
    times: list[float] = []
    deadline = time.monotonic() + seconds
    while len(times) < 20_000 and time.monotonic() < deadline:
        start = time.perf_counter()
        for q in forms:
            parse(q)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def rows(seconds: float) -> dict[str, float]:
    for q in FORMS:
        cpu_cores(q)  # warm, as a running service is
    return {
        f"ours, cached (the request path), {len(FORMS)} quantities": per_pod_us(
            cpu_cores, FORMS, seconds
        ),
        f"ours, uncached, {len(FORMS)} quantities": per_pod_us(_uncached, FORMS, seconds),
        f"kubernetes.utils.parse_quantity, {len(FORMS)} quantities": per_pod_us(
            library_cores, FORMS, seconds
        ),
    }


def disagreements() -> list[tuple[str, float | None, float | None]]:
    """(input, ours, the library's) wherever the two differ."""
    return [
        (q, _uncached(q), library_cores(q)) for q in FORMS + ODD if _uncached(q) != library_cores(q)
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="short loops")
    args = p.parse_args(argv)
    seconds = 0.1 if args.quick else 2.0
    runs = [rows(seconds) for _ in range(args.runs)]
    width = max(map(len, runs[0]))
    print(f"{'parse':<{width}}  median us per pod (runs)")
    for key in runs[0]:
        values = [r[key] for r in runs]
        spread = ", ".join(f"{v:.2f}" for v in values)
        print(f"{key:<{width}}  {statistics.median(values):8.2f}  ({spread})")
    print("\ninputs read differently (ours / the library's; None: refused):")
    for q, ours, theirs in disagreements():
        print(f"  {q!r:>12}: {ours} / {theirs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
