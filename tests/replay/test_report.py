"""The report: the table beside the simulation's, the JSON in `simulate --json`'s shape,
and the fidelity check with its warning naming what the models leave out."""

from __future__ import annotations

import json
from array import array
from dataclasses import replace
from pathlib import Path
from unittest.mock import MagicMock

from extender.replay.model import History, ReplayNode, Role
from extender.replay.models import KUBE_SCHEDULER, REAL, SCHEDULERS, Options
from extender.replay.report import FAR, ReplayReport, Setup, fidelity, render, to_json
from extender.simulation.prometheus import Pipeline
from extender.simulation.run import RunResult
from extender.simulation.stats import Metrics
from tests.replay.test_driver import GRID, STEPS, at, node, pod


def metrics(hot: float, p95: float = 0.8, std: float = 0.1) -> Metrics:
    return Metrics(hot, p95, 1.0, p95, 1.1, std, 2, 0, 10, 0)


def result(name: str, m: Metrics, placements: dict[str, str] | None = None) -> RunResult:
    return RunResult("replay", 1, name, m, (), placements or {}, frozenset(), 0)


def history() -> History:
    tainted = replace(node("node-b", 4, 0.2), taints=("dedicated:NoSchedule",))
    web = pod("web", "node-a", at(12), usage=[0.5])
    web.tolerations = ("dedicated:NoSchedule",)
    return History(
        GRID,
        {"node-a": node("node-a", 4, 0.5), "node-b": tainted},
        [web, pod("old", "node-a", at(2), role=Role.EARLIER)],
        notes=["a note"],
    )


def report(runs: dict[str, RunResult]) -> ReplayReport:
    h = history()
    setup = Setup(
        url="http://prometheus:9090",
        policy="policy.yaml",
        start=GRID.measured_start,
        end=GRID.end,
        step=30,
        lead=300,
        pipeline=Pipeline(),
        namespaces=("shop",),
        schedulers=("default-scheduler",),
        options=Options(weight=1),
    )
    return ReplayReport(setup, h, runs, fidelity(runs[REAL], runs[KUBE_SCHEDULER], h), ("n1",))


def runs(model_hot: float) -> dict[str, RunResult]:
    out = {REAL: result(REAL, metrics(100), {"uid-web": "node-a"})}
    out[KUBE_SCHEDULER] = result(KUBE_SCHEDULER, metrics(model_hot), {"uid-web": "node-a"})
    for name in SCHEDULERS[1:]:
        out[name] = result(name, metrics(40))
    return out


def test_the_table_and_a_faithful_model() -> None:
    text = render(report(runs(110)))
    lines = text.splitlines()
    assert lines[0].startswith("decice-extender replay: http://prometheus:9090, ")
    assert "history: 2 nodes, 2 pods (1 replayed, 1 arrived before the range)" in text
    head = next(line for line in lines if "as-it-happened" in line and "kube-scheduler" in line)
    assert head.split() == [REAL, "kube-scheduler", "decice", "trimaran-tlp", "trimaran-lvrb",
                            "koordinator"]  # fmt: skip
    hot = next(line for line in lines if line.strip().startswith("node-minutes above 90% CPU"))
    assert hot.split()[4:] == ["100", "110", "40", "-64%", "40", "-64%", "40", "-64%", "40", "-64%"]
    assert "kube-scheduler model vs as it happened: 10% apart" in text
    assert "100% of replayed pods on their real node: faithful (within 25%)" in text
    assert "warning" not in text
    assert text.endswith("notes:\n  n1")


def test_a_model_far_from_what_happened_is_not_to_be_trusted_and_says_why() -> None:
    r = report(runs(160))
    assert r.fidelity.far and r.fidelity.distance > FAR
    text = render(r)
    assert "60% apart" in text
    assert "warning: more than 25% apart: the replay is not to be trusted" in text
    assert "1 replayed pods tolerate taints: shop/web (dedicated:NoSchedule)" in text
    assert "1 nodes carry NoSchedule/NoExecute taints: node-b (dedicated:NoSchedule)" in text
    assert "exports no affinity nor topology spread" in text


def test_small_figures_are_judged_against_a_floor() -> None:
    # 0 against 3 hot node-minutes of 100 nodes x 2 hours is no infidelity.
    h = History(GRID, {f"n{i}": node(f"n{i}", 4, 0.2) for i in range(100)}, [])
    real, model = result(REAL, metrics(0)), result(KUBE_SCHEDULER, metrics(3))
    check = fidelity(real, model, h)
    assert check.differences["node_minutes_hot"] == 3 / (0.005 * 100 * (STEPS - 10) * 30 / 60)
    assert not check.far


def test_the_json_has_simulates_shape() -> None:
    doc = json.loads(json.dumps(to_json(report(runs(110)))))
    replay = doc["scenarios"]["replay"]
    assert list(replay["schedulers"]) == [REAL, *SCHEDULERS]
    cell = replay["schedulers"]["decice"]["node_minutes_hot"]
    assert cell == {"mean": 40.0, "sd": 0.0, "low": 40.0, "high": 40.0, "values": [40.0]}
    assert replay["seeds"] == [1]
    assert doc["plan"]["namespaces"] == ["shop"] and doc["plan"]["step"] == 30
    assert doc["history"] == {"nodes": 2, "pods": {"replayed": 1, "arrived before the range": 1}}
    assert doc["fidelity"]["far"] is False
    assert doc["notes"] == ["n1"]


def test_background_arrays_stay_out_of_the_json() -> None:
    doc = to_json(report(runs(110)))
    assert "background" not in json.dumps(doc)
    assert isinstance(history().nodes["node-a"].background, array)
    assert isinstance(history().nodes["node-a"], ReplayNode)


def test_the_plot_draws_a_panel_per_row(tmp_path: Path) -> None:
    from extender.cli.replay import plot

    r = report(runs(110))
    plt = MagicMock()
    axes = [MagicMock() for _ in r.runs]
    figure = MagicMock()
    plt.subplots.return_value = (figure, [axes])
    plot(r, tmp_path / "plots", plt)
    assert plt.subplots.call_args.args == (1, len(r.runs))
    assert [ax.set_title.call_args.args[0] for ax in axes] == list(r.runs)
    figure.savefig.assert_called_once_with(tmp_path / "plots" / "replay.png", dpi=100)
    assert (tmp_path / "plots").is_dir()
