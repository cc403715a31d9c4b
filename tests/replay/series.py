"""Hand-made range-query answers for the replay's unit tests: a tiny grid, nodes and pods
written as the matrices Prometheus answers, folded into Facts as collect.py folds them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from extender.replay.facts import Facts
from extender.replay.model import Grid

START = 1_000_000.0
STEP = 30.0
WINDOW = 300.0


def grid(steps: int = 40, measured_from: int = 10) -> Grid:
    return Grid(START, STEP, steps, measured_from)


def at(k: float) -> float:
    """The time of step k (fractions for times between steps)."""
    return START + k * STEP


def matrix(labels: dict[str, str], points: Sequence[tuple[float, float]]) -> dict[str, Any]:
    return {"metric": labels, "values": [[t, repr(float(v))] for t, v in points]}


def windows(g: Grid) -> list[float]:
    """The window queries' evaluation times over the grid."""
    n = int(g.steps * g.step // WINDOW) + 1
    return [g.start + WINDOW * (i + 1) for i in range(n)]


class Cluster:
    """Facts built series by series, the way the collector folds answers."""

    def __init__(self, g: Grid | None = None) -> None:
        self.grid = g or grid()
        self.facts = Facts(self.grid, WINDOW)

    def node(
        self, name: str, cores: float, cpu: Callable[[int], float | None], memory: float = 16e9
    ) -> None:
        """`cpu(k)`: utilisation at step k (None: no value)."""
        last = windows(self.grid)[-1]
        self.facts.fold(
            "allocatable",
            [
                matrix({"node": name, "resource": "cpu"}, [(last, cores)]),
                matrix({"node": name, "resource": "memory"}, [(last, memory)]),
            ],
        )
        points = [(at(k), v) for k in range(self.grid.steps) if (v := cpu(k)) is not None]
        self.facts.fold_node_cpu(
            [matrix({"node": name}, points)], lambda labels: labels.get("node")
        )

    def pod(
        self,
        name: str,
        node: str | None,
        created: float,
        *,
        start: float | None = None,
        end: float | None = None,
        cpu: float = 0.25,
        use: Callable[[int], float | None] | None = None,
        namespace: str = "shop",
        owner: tuple[str, str] | None = ("deployment", "web"),
        created_by: str = "ReplicaSet",
        scheduler: str | None = "default-scheduler",
        completed: bool = False,
        selectors: dict[str, str] | None = None,
        tolerations: Sequence[tuple[str, str]] = (),
    ) -> None:
        """A pod created at `created` (a time), bound to `node` (None: Pending), running
        from `start` to `end` (times; None: start = created, end = past the grid)."""
        g, facts = self.grid, self.facts
        labels = {"namespace": namespace, "pod": name, "uid": f"uid-{name}"}
        start = created if start is None else start
        gone = end if end is not None else g.end + 3600
        seen = [w for w in windows(g) if w - WINDOW < gone and w > created]
        info = {**labels, "node": node or "", "created_by_kind": created_by}
        facts.fold("pod_info", [matrix(info, [(w, 1) for w in seen])])
        last = seen[-1] if seen else g.end
        facts.fold("created", [matrix(labels, [(last, created)])])
        if node is not None:
            facts.fold("started", [matrix(labels, [(last, start)])])
            if end is not None:
                what = "completed" if completed else "deleted"
                facts.fold(what, [matrix(labels, [(last, end)])])
        facts.fold("requests", [matrix({**labels, "resource": "cpu"}, [(last, cpu)])])
        if owner is not None:
            kind, workload = owner
            facts.fold(
                "owners",
                [
                    matrix(
                        {
                            "namespace": namespace,
                            "pod": name,
                            "workload": workload,
                            "workload_type": kind,
                        },
                        [(last, 1)],
                    )
                ],
            )
        if scheduler is not None:
            facts.fold("scheduler", [matrix({**labels, "name": scheduler}, [(last, 1)])])
        if selectors is not None:
            keys = {f"nodeselector_{k}": v for k, v in selectors.items()}
            facts.fold("selectors", [matrix({**labels, **keys}, [(last, 1)])])
        if tolerations:
            facts.fold(
                "tolerations",
                [matrix({**labels, "key": k, "effect": e}, [(last, 1)]) for k, e in tolerations],
            )
        if use is not None:
            points = [(at(k), v) for k in range(g.steps) if (v := use(k)) is not None]
            facts.fold_usage([matrix({"namespace": namespace, "pod": name}, points)])
