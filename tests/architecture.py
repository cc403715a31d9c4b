"""The import rules of `extender.PACKAGES` and `extender.LIBRARIES` as import-linter
contracts: the part of pyproject.toml between the GENERATED markers.

    python -m tests.architecture           # exit 1 and say so when pyproject.toml differs
    python -m tests.architecture --write   # rewrite that part of pyproject.toml

One `forbidden` contract per subpackage (the others it may not import) and one per group
of outside libraries (every subpackage but their owners), all with
`allow_indirect_imports`: a rule is about where an import statement is, as the map says
(cli may import service, which imports cluster, which imports kubernetes). The contracts
about modules inside one subpackage (the pure parts, the decisions' layers) are written by
hand below the generated part.
"""

from __future__ import annotations

import sys
from pathlib import Path

import extender

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
BEGIN = "# BEGIN GENERATED: import rules (python -m tests.architecture --write)"
END = "# END GENERATED: import rules"


def allowed() -> dict[str, frozenset[str]]:
    """subpackage -> the other subpackages it may import, `EVERY_PACKAGE` expanded."""
    names = frozenset(extender.PACKAGES)
    out: dict[str, frozenset[str]] = {}
    for name, package in extender.PACKAGES.items():
        if package.may_import == extender.EVERY_PACKAGE:
            out[name] = names - {name}
            continue
        unknown = set(package.may_import) - names
        assert not unknown, f"PACKAGES[{name!r}] names no subpackage {sorted(unknown)}"
        out[name] = frozenset(package.may_import) - {name}
    return out


def _strings(names: list[str], indent: str = "    ") -> str:
    """A TOML array of strings, one line per name."""
    return "[\n" + "".join(f'{indent}"{n}",\n' for n in names) + "]"


def contracts() -> str:
    """The generated part of pyproject.toml, markers included."""
    order = list(extender.PACKAGES)
    rules = allowed()
    blocks = [
        BEGIN,
        "# The map is extender.PACKAGES and extender.LIBRARIES; edit it there, not here.",
    ]
    for name in order:
        forbidden = [f"extender.{n}" for n in order if n != name and n not in rules[name]]
        if not forbidden:
            continue
        may = ", ".join(sorted(rules[name]))
        says = f"imports only {may}" if may else "imports no other subpackage"
        blocks.append(
            "[[tool.importlinter.contracts]]\n"
            f'name = "extender.{name} {says}"\n'
            'type = "forbidden"\n'
            f'source_modules = ["extender.{name}"]\n'
            f"forbidden_modules = {_strings(forbidden)}\n"
            "allow_indirect_imports = true"
        )
    owners: dict[tuple[str, ...], list[str]] = {}
    for library, packages in extender.LIBRARIES.items():
        owners.setdefault(tuple(packages), []).append(library)
    for packages, libraries in owners.items():
        sources = [f"extender.{n}" for n in order if n not in packages]
        where = " and ".join(f"extender.{p}" for p in packages)
        blocks.append(
            "[[tool.importlinter.contracts]]\n"
            f'name = "{", ".join(libraries)}: imported from {where} only"\n'
            'type = "forbidden"\n'
            f"source_modules = {_strings(sources)}\n"
            f"forbidden_modules = {_strings(libraries)}\n"
            "allow_indirect_imports = true"
        )
    blocks.append(END)
    return "\n\n".join(blocks) + "\n"


def current(text: str) -> str | None:
    """The generated part of a pyproject.toml's text, markers included; None without them."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start : end + len(END)] + "\n"


def rewritten(text: str) -> str:
    """`text` with its generated part replaced by `contracts()`."""
    part = current(text)
    assert part is not None, f"pyproject.toml has no {BEGIN!r} ... {END!r} part"
    return text.replace(part, contracts(), 1)


def main(argv: list[str]) -> int:
    text = PYPROJECT.read_text(encoding="utf-8")
    if argv == ["--write"]:
        PYPROJECT.write_text(rewritten(text), encoding="utf-8")
        print(f"wrote the import-linter contracts of {PYPROJECT}")
        return 0
    if argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if current(text) != contracts():
        print("pyproject.toml's import rules differ from extender.PACKAGES: run", end=" ")
        print("python -m tests.architecture --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
