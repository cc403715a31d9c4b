"""The comparison's frame: a plan that names what exists, the policy as given (maxHosts
aside), and a room that stays pure (no file, network or plotting library), peers included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from extender.policy.loading import load_settings
from extender.simulation.experiment import Plan, run_plan, with_max_hosts
from extender.simulation.profiles import DECICE, KUBE_SCHEDULER, SCHEDULERS
from extender.simulation.scenarios import Size

ROOT = Path(__file__).resolve().parents[2]
ROOM = ROOT / "extender" / "simulation"
SHIPPED = ROOT / "config" / "extender.yaml"
IMPURE = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "socket",
    "subprocess",
    "urllib",
    "yaml",
    "tabulate",
    "matplotlib",
    "time",
    "asyncio",
}


def test_the_room_imports_no_io_library() -> None:
    found = []
    paths = sorted(ROOM.rglob("*.py"))
    assert any(p.parent.name == "peers" for p in paths)
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in IMPURE]
    assert not found


def test_a_plan_names_known_scenarios_and_some_seed() -> None:
    with pytest.raises(ValueError, match="unknown scenarios"):
        Plan(scenarios=("uniform", "lunar"))
    with pytest.raises(ValueError, match="no seeds"):
        Plan(seeds=())
    with pytest.raises(ValueError, match="unknown schedulers"):
        Plan(schedulers=("kube-scheduler", "volcano"))
    with pytest.raises(ValueError, match="no schedulers"):
        Plan(schedulers=())
    assert Plan().schedulers == SCHEDULERS


def test_max_hosts_is_the_only_change_to_the_policy() -> None:
    shipped = load_settings(SHIPPED)
    assert with_max_hosts(shipped, None) is shipped
    ten = with_max_hosts(shipped, 10)
    assert ten.prioritize.max_hosts == 10
    assert ten.default == shipped.default and ten.herd_guard == shipped.herd_guard
    assert with_max_hosts(shipped, 0).prioritize.max_hosts is None
    # the policy's shortlist stays as it was (it was reset to the default once)
    unlisted = shipped.model_copy(
        update={"prioritize": shipped.prioritize.model_copy(update={"shortlist": None})}
    )
    assert with_max_hosts(unlisted, 0).prioritize.shortlist is None
    assert with_max_hosts(unlisted, 10).prioritize.shortlist is None
    assert with_max_hosts(shipped, 10).prioritize.shortlist == shipped.prioritize.shortlist


def test_run_plan_reports_progress_in_order() -> None:
    seen: list[tuple[str, int]] = []
    plan = Plan(
        scenarios=("new-node", "uniform"),
        seeds=(1, 2),
        size=Size(nodes=3, warmup=60.0, duration=120.0),
        schedulers=(DECICE, KUBE_SCHEDULER),
    )
    results = run_plan(load_settings(SHIPPED), plan, 1, lambda key, runs: seen.append(key))
    assert seen == [("new-node", 1), ("new-node", 2), ("uniform", 1), ("uniform", 2)]
    assert [r[DECICE].seed for r in results["uniform"]] == [1, 2]
    assert list(results["uniform"][0]) == [DECICE, KUBE_SCHEDULER]
