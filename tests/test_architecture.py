"""The house keeps its map: every module lives in a room of extender/__init__.py's map,
imports only the rooms its room may, and stays small; pyproject.toml's import-linter
contracts (outside libraries, layers) are kept."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import extender

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "extender"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 200
ROOM_LINE = re.compile(r"^    ([a-z]+) +may import: (.+)$")


def rooms() -> dict[str, frozenset[str]]:
    """room -> the rooms it may import, as the package docstring's map says."""
    lines = (extender.__doc__ or "").splitlines()
    named = {m.group(1): m.group(2).split() for m in map(ROOM_LINE.match, lines) if m}
    out: dict[str, frozenset[str]] = {}
    for room, words in named.items():
        if words == ["nothing"]:
            out[room] = frozenset()
        elif words == ["every", "room"]:
            out[room] = frozenset(named) - {room}
        else:
            unknown = set(words) - set(named)
            assert not unknown, f"the map's {room} line names no room {sorted(unknown)}"
            out[room] = frozenset(words)
    return out


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def room_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def imported_rooms(path: Path) -> set[tuple[int, str]]:
    """(line, room) of every `extender.<room>` import, at any depth (functions and
    TYPE_CHECKING blocks included)."""
    out: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "extender":
                names = [f"extender.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "extender" and len(parts) > 1 and parts[1] != "__version__":
                out.add((node.lineno, parts[1]))
    return out


def test_the_map_names_every_room_and_only_rooms() -> None:
    on_disk = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(rooms()) == on_disk


def test_every_module_is_in_a_room() -> None:
    loose = [p.name for p in modules() if room_of(p) is None]
    assert sorted(loose) == ["__init__.py", "__main__.py"]


def test_every_room_imports_only_what_the_map_allows() -> None:
    allowed = rooms()
    broken = [
        f"{path.relative_to(ROOT)}:{line}: {room} may not import extender.{target}"
        for path in modules()
        if (room := room_of(path)) is not None
        for line, target in sorted(imported_rooms(path))
        if target != room and target not in allowed[room]
    ]
    assert not broken, "\n".join(broken)


def test_the_map_check_catches_an_import_against_it(tmp_path: Path) -> None:
    wrong = tmp_path / "decisions" / "leak.py"
    wrong.parent.mkdir()
    wrong.write_text("def f() -> None:\n    from extender.cluster.client import KubeClient\n")
    assert imported_rooms(wrong) == {(2, "cluster")}
    assert "cluster" not in rooms()["decisions"]


def test_modules_and_classes_stay_small() -> None:
    big: list[str] = []
    for path in modules():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    big.append(f"{path.relative_to(ROOT)}: class {node.name} {size} lines")
    assert not big, "\n".join(big)


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout
