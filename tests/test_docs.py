"""The docs stay true to the tree: every Markdown link resolves (files exist, #anchors name
a heading), every repository path and module a doc names exists, and no doc cites what
a reader of the project does not have (the workspace's `../shared/`, a "DESIGN.md").

Links to the web are not fetched (no network here); their form is checked.

And every default a doc states is the code's: the chart README's `| key | default |` tables
against values.yaml, every `--help` that says "(default X)" against the parser (or the
constant the command applies), every `helm install`/`helm upgrade` example rendered, and
the defaults stated in prose (STATED in `_stated`) against the code that holds them.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

_REPO_PATH = re.compile(
    r"(?<![\w./:~<>$-])(?P<path>(?:extender|tests|docs|config|deploy|scripts|\.ci)/[\w.*/-]*[\w*/])"
)
"""A path from the repository's top (`extender/decisions/wire.py`, `config/*.yaml`)."""
_DOC_RELATIVE = re.compile(r"(?<![\w./:~<>$-])(?P<path>(?:ci|files|templates)/[\w.*-]+)")
"""A path from the chart's folder, as its README and values name them (`ci/ha-values.yaml`)."""
_BARE_MODULE = re.compile(r"(?<![\w./<>-])(?P<name>[a-z_][a-z0-9_]*\.py)\b")
"""A bare module file name (`engine.py`): some tracked file must have it."""
_DOTTED = re.compile(r"(?<![\w.])(?P<name>(?:extender|tests)(?:\.[A-Za-z_]\w*)+)")
"""A dotted module name, possibly with an attribute (`extender.policy.reference`)."""
_KUBECTL_RESOURCE = re.compile(r"deploy/[\w<>-]+(?![\w/.])")
"""`kubectl ... deploy/NAME`: a Deployment, not a folder."""
NOT_CITED = ("../shared", "DESIGN.md")
"""What only the authors' workspace has; docs and code cite upstream files or our docs."""
NOT_YET_CLEAN: set[str] = set()
"""Modules still citing DESIGN.md, owned by another change in flight (remove when fixed)."""

_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    files = [ROOT / line for line in out.stdout.splitlines() if line]
    return files or sorted(ROOT.glob("*.md"))


def prose_lines(path: Path) -> list[str]:
    """The lines outside fenced code blocks (code may contain anything bracketed)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def slug(title: str) -> str:
    """GitHub's heading anchor: lower case, markup and punctuation dropped, spaces -> '-'."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", title).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose_lines(path):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group("title"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """Link targets outside code: `[a-z](x)` in a code span is text, not a link."""
    return [
        m.group("target")
        for line in prose_lines(path)
        for m in _LINK.finditer(_CODE_SPAN.sub("", line))
    ]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(path: Path) -> None:
    broken = []
    for target in links(path):
        if target.startswith(("http://", "https://")):
            if " " in target or "<" in target:
                broken.append(f"{target}: not a URL")
            continue
        if target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file {dest.relative_to(ROOT.parent)}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_slugs_follow_github() -> None:
    assert slug("Why did my pod go there (or why is it still Pending)?") == (
        "why-did-my-pod-go-there-or-why-is-it-still-pending"
    )
    assert slug("Scheduler-side policy: `ignorable`, `httpTimeout`, `weight`") == (
        "scheduler-side-policy-ignorable-httptimeout-weight"
    )
    assert slug("Faults → behaviour → test") == "faults--behaviour--test"


def test_the_checker_finds_a_broken_link(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n[ok](#title) [bad](#nope) [gone](missing.md)\n```\n[x](y)\n```\n")
    assert links(doc) == ["#title", "#nope", "missing.md"]
    assert anchors(doc) == {"title"}


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / line for line in out.stdout.splitlines() if line]


def doc_files() -> list[Path]:
    """What a reader reads: Markdown, the chart's values and the policy files' comments."""
    return markdown_files() + tracked("config/*.yaml", "deploy/helm/decice-extender/values.yaml")


def _exists(path: str, base: Path) -> bool:
    for folder in (ROOT, base):
        if any(ch in path for ch in "*?[") and any(folder.glob(path)):
            return True
        if (folder / path).exists():
            return True
    return False


def _top_level_names(source: Path) -> set[str]:
    """The classes, functions and assigned names a module defines at its top level."""
    names: set[str] = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _module_exists(dotted: str) -> bool:
    """`extender.a.b[.Name[.attr]]`: the longest prefix that is a module, then (if more
    follows) a name it defines at its top level."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        for source in (base.with_suffix(".py"), base / "__init__.py"):
            if source.exists():
                rest = parts[cut:]
                return not rest or (len(rest) <= 2 and rest[0] in _top_level_names(source))
    return False


def named_paths(path: Path) -> list[tuple[int, str]]:
    """(line, problem) for every repository path, module file or dotted module the file
    names that the tree does not have."""
    known_files = {p.name for p in tracked()}
    chart = ROOT / "deploy" / "helm" / "decice-extender"
    under_chart = path.is_relative_to(chart)
    modules = {p.name for p in (ROOT / "extender").iterdir() if p.is_dir()}
    modules |= {p.name for p in (ROOT / "tests").iterdir() if p.is_dir()}
    broken: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in _REPO_PATH.finditer(line):
            name = m.group("path")
            if _KUBECTL_RESOURCE.match(line, m.start()) and "kubectl" in line:
                continue
            if not _exists(name, path.parent):
                broken.append((number, f"no such path {name}"))
        if under_chart:
            for m in _DOC_RELATIVE.finditer(line):
                if not _exists(m.group("path"), chart):
                    broken.append((number, f"no such path {m.group('path')} in the chart"))
        for m in _BARE_MODULE.finditer(line):
            if m.group("name") not in known_files:
                broken.append((number, f"no tracked file is named {m.group('name')}"))
        for m in _DOTTED.finditer(line):
            dotted = m.group("name").rstrip(".")
            if dotted.split(".")[1] in modules and not _module_exists(dotted):
                broken.append((number, f"no module or name {dotted}"))
    return broken


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(path: Path) -> None:
    broken = [f"{path.relative_to(ROOT)}:{n}: {what}" for n, what in named_paths(path)]
    assert not broken, "\n".join(broken)


def test_the_path_check_finds_a_missing_file(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text(
        "See `extender/decisions/wire.py` and `extender/metrics.py`, `config/*.yaml`,\n"
        "`python -m extender.policy.reference`, `extender.decisions.nowhere`,\n"
        "`extender.decisions.engine.Engine`, `extender.image.repository` (a Helm value),\n"
        "`kubectl -n ns logs deploy/decice-extender`, `engine.py` and `gone_module.py`.\n"
    )
    assert named_paths(doc) == [
        (1, "no such path extender/metrics.py"),
        (2, "no module or name extender.decisions.nowhere"),
        (4, "no tracked file is named gone_module.py"),
    ]


@pytest.mark.parametrize(
    "path",
    doc_files() + tracked("extender/*.py", "deploy/*", "tests/e2e/*.py", "tests/stories/*.py"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_nothing_cites_the_authors_workspace(path: Path) -> None:
    if str(path.relative_to(ROOT)) in NOT_YET_CLEAN:
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    cited = [
        f"{path.relative_to(ROOT)}:{n}: {word}"
        for n, line in enumerate(text.splitlines(), 1)
        for word in NOT_CITED
        if word in line
    ]
    assert not cited, "\n".join(cited)


# --- Defaults the docs state are the code's ------------------------------------------------
# Three sweeps and one list. The sweeps: every `| key | default | ... |` table of the
# chart's README against values.yaml; every `--help` of the CLI that states a default
# against the parser's (or, where the default is applied later, the constant the code
# applies); every `helm install`/`helm upgrade` example of the docs, rendered. The list
# (STATED): defaults stated in prose, each with a pattern that finds them and the code
# that holds the value. A new prose default gets a line there.

CHART = ROOT / "deploy" / "helm" / "decice-extender"
_CELL_CODE = re.compile(r"`([^`]*)`")


def chart_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return loaded


def value_at(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def table_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line, cells) of every row of the tables whose header is `| key | default | ...`."""
    rows: list[tuple[int, list[str]]] = []
    inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| key | default |"):
            inside = True
        elif not line.startswith("|"):
            inside = False
        elif inside and not set(cells[0]) <= {"-", ":"}:
            rows.append((number, cells))
    return rows


def row_keys(cell: str) -> list[str]:
    """`a.b.c` / `d` -> [a.b.c, a.b.d]: a key without a dot is a sibling of the first."""
    keys = _CELL_CODE.findall(cell)
    parent = keys[0].rsplit(".", 1)[0] if keys and "." in keys[0] else ""
    return [k if "." in k or not parent else f"{parent}.{k}" for k in keys]


_RESOURCES = re.compile(r"requests (\w+)/(\w+), limit (\w+)")
#: Rows whose default cell is prose, not a value: the table's word for what they hold.
PROSE_DEFAULTS = {
    "policy": "kube-prometheus-stack CPU query",
    "podSecurityContext": "non-root 65532, seccomp RuntimeDefault",
    "securityContext": "read-only root, no privilege escalation, drop ALL",
    "networkPolicy.metricsFrom": "namespace `monitoring`",
}


def stated_value_problems(path: Path) -> list[str]:
    """What the `| key | default |` tables of `path` state that values.yaml does not hold."""
    values = chart_values()
    problems = []
    for number, (key_cell, default_cell, *_rest) in table_rows(path):
        keys = row_keys(key_cell)
        where = f"{path.name}:{number} {', '.join(keys)}"
        try:
            actual = [value_at(values, k) for k in keys]
        except KeyError as missing:
            problems.append(f"{where}: values.yaml has no {missing}")
            continue
        if keys[0] in PROSE_DEFAULTS:
            if default_cell != PROSE_DEFAULTS[keys[0]]:
                problems.append(f"{where}: the prose default changed: {default_cell!r}")
            continue
        if keys[0].endswith("resources"):
            match = _RESOURCES.search(default_cell)
            want = actual[0]
            if match is None or match.groups() != (
                want["requests"]["cpu"],
                want["requests"]["memory"],
                want["limits"]["memory"],
            ):
                problems.append(f"{where}: states {default_cell!r}, values.yaml has {want}")
            continue
        if default_cell == "empty":  # a row of several empty maps and lists
            if any(a not in ({}, [], "", None) for a in actual):
                problems.append(f"{where}: states empty, values.yaml has {actual}")
            continue
        stated = _CELL_CODE.findall(re.sub(r"\([^)]*\)", "", default_cell))  # not (notes)
        if len(stated) == 1 and len(keys) > 1:
            stated = stated * len(keys)  # one value for every key of the row
        if len(stated) != len(keys):
            problems.append(f"{where}: {len(keys)} keys but {len(stated)} defaults stated")
            continue
        for key, text, value in zip(keys, stated, actual, strict=True):
            if yaml.safe_load(text) != value:
                problems.append(f"{where}: states {key} = {text}, values.yaml has {value!r}")
    return problems


def test_the_chart_readmes_tables_state_values_yaml() -> None:
    assert len(table_rows(CHART / "README.md")) > 60
    assert stated_value_problems(CHART / "README.md") == []


def test_the_table_check_finds_a_wrong_default(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(
        "| key | default | description |\n|---|---|---|\n"
        "| `scheduler.extender.weight` | `1` | |\n"
        "| `replicas` | `1` | |\n"
        "| `extender.resources` | requests 100m/320Mi, limit 1Gi | |\n"
        "| `scheduler.extender.httpTimeout` / `ignorable` | `5s` / `true` | |\n"
    )
    problems = stated_value_problems(doc)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "states scheduler.extender.weight = 1, values.yaml has 2",
        "states 'requests 100m/320Mi, limit 1Gi', values.yaml has "
        + str(chart_values()["extender"]["resources"]),
        "states scheduler.extender.ignorable = true, values.yaml has False",
    ]


_HELP_DEFAULT = re.compile(r"\(default ([^\s,;:)]+)")
"""`(default 5s)`, `(default 2, as shipped)`: a literal default (not `(default: the ...)`)."""


def late_defaults() -> dict[tuple[str, str], object]:
    """Options whose parser default is None because the command applies its default later
    (to tell "not given" apart): the value it applies, from the code that applies it."""
    from extender.cli import simulate
    from extender.policy import scheduler_config as sc
    from extender.replay.reconstruct import DEFAULT_SCHEDULER

    return {
        ("scheduler-config", "--weight"): sc.DEFAULT_WEIGHT,
        ("scheduler-config", "--http-timeout"): sc.DEFAULT_HTTP_TIMEOUT,
        ("scheduler-config", "--lease-name"): sc.DEFAULT_LEASE_NAME,
        ("scheduler-config", "--lease-namespace"): sc.DEFAULT_LEASE_NAMESPACE,
        ("scheduler-config", "--service-account"): sc.DEFAULT_SERVICE_ACCOUNT,
        ("simulate", "--nodes"): simulate.DEFAULTS["nodes"],
        ("simulate", "--burst"): simulate.DEFAULTS["burst"],
        ("simulate", "--warmup"): simulate.DEFAULTS["warmup"],
        ("simulate", "--duration"): simulate.DEFAULTS["duration"],
        ("replay", "--scheduler-name"): DEFAULT_SCHEDULER,
        ("rebalance", "--port"): "server.metricsPort",
        ("shadow", "--port"): "server.metricsPort",
    }


def same_value(stated: str, value: object) -> bool:
    """`5s` is 5.0 seconds, `2` is 2, `cpu` is "cpu"."""
    if isinstance(value, bool) or value is None:
        return stated == str(value)
    if isinstance(value, int | float):
        seconds = re.fullmatch(r"([\d.]+)s", stated)
        number = float(seconds.group(1)) if seconds else float(stated)
        return number == float(value)
    return stated == str(value)


class _Commands:
    """Stands in for the subparsers action a command's `add_to` fills: each subcommand's
    parser, kept, its help one line per option (public argparse only)."""

    def __init__(self) -> None:
        self.parsers: dict[str, argparse.ArgumentParser] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.pop("help", None)
        wide = lambda prog: argparse.HelpFormatter(prog, width=10_000, max_help_position=200)  # noqa: E731
        self.parsers[name] = argparse.ArgumentParser(prog=name, formatter_class=wide, **kwargs)
        return self.parsers[name]


_OPTION_LINE = re.compile(r"^  (?P<flags>-[^ ,]+(?:, -[^ ,]+)*)(?: \S+)*?\s{2,}(?P<help>\S.*)$")


def option_helps() -> Iterator[tuple[str, str, str, argparse.ArgumentParser]]:
    """(command, its longest flag, that option's help, the command's parser)."""
    from extender.cli.main import COMMANDS

    commands = _Commands()
    for command in COMMANDS:
        command.add_to(cast(Any, commands))
    for name, sub in commands.parsers.items():
        for line in sub.format_help().splitlines():
            match = _OPTION_LINE.match(line)
            if match:
                flag = match.group("flags").split(", ")[-1]
                yield name, flag, match.group("help"), sub


def help_default_problems() -> list[str]:
    late = late_defaults()
    problems, seen = [], 0
    for command, option, text, sub in option_helps():
        match = _HELP_DEFAULT.search(text)
        if match is None:
            continue
        seen += 1
        stated = match.group(1)
        default = sub.get_default(option.lstrip("-").replace("-", "_"))
        if default not in (None, []):
            value = default
        elif (command, option) in late:
            value = late[command, option]
        else:
            problems.append(f"{command} {option}: states default {stated}, code has none")
            continue
        if not same_value(stated, value):
            problems.append(f"{command} {option}: --help says {stated}, the code {value!r}")
    assert seen > 20, f"only {seen} stated defaults found: the pattern broke"
    return problems


def test_every_default_help_states_is_the_codes() -> None:
    assert help_default_problems() == []


def test_the_help_check_tells_seconds_numbers_and_words() -> None:
    assert same_value("5s", 5.0) and same_value("2", 2) and same_value("cpu", "cpu")
    assert not same_value("1", 2) and not same_value("5s", 10.0)


# The prose: (doc, pattern whose group 1 is the stated value, what holds it in the code).
def _shipped_threshold() -> float:
    from extender.policy.loading import load_settings

    shipped = load_settings(ROOT / "config" / "extender.yaml")
    [cpu] = [m for m in shipped.fetched_metrics if m.name == "cpu"]
    assert cpu.filter is not None and cpu.filter.above is not None
    return float(cpu.filter.above)


def _chart_series_at_15000() -> int:
    policy = chart_values()["policy"]
    return 15_000 * (1 + len(policy["metrics"]))  # one policy's scores + each metric's values


def _operating_cpu_ms(column: int) -> float:
    """The first (current) figure of operating.md's "extender CPU per pod placed" row."""
    text = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| extender CPU per pod"))
    cell = row.strip("|").split("|")[column]
    figure = re.search(r"([\d.]+)(?:-([\d.]+))? ms", cell)
    assert figure is not None, cell
    return float(figure.group(2) or figure.group(1))  # a range: its upper end


def _stated() -> list[tuple[str, str, Callable[[], object]]]:
    from extender.cli import simulate
    from extender.policy import scheduler_config as sc
    from extender.policy.backend import PrometheusSettings
    from extender.policy.sections import ShadowSettings

    render = _load_render()
    chart_readme, values = (
        "deploy/helm/decice-extender/README.md",
        "deploy/helm/decice-extender/values.yaml",
    )
    return [
        ("README.md", r"`weight: (\d+)`", lambda: sc.DEFAULT_WEIGHT),
        ("README.md", r"    weight: (\d+) +# docs/operating.md", lambda: sc.DEFAULT_WEIGHT),
        ("README.md", r"`httpTimeout: (\w+)`", lambda: sc.DEFAULT_HTTP_TIMEOUT),
        ("README.md", r"0/5000 nodes are available: .* decice: cpu above ([\d.]+)\.",
         _shipped_threshold),
        ("README.md", r"\(`config/extender.yaml`, threshold ([\d.]+)\)", _shipped_threshold),
        ("README.md", r"misrequested and diurnal, on (\d+)$", lambda: simulate.DEFAULTS["nodes"]),
        ("README.md", r"^nodes, (\d+) min warm-up", lambda: simulate.DEFAULTS["warmup"]),
        ("README.md", r"warm-up then (\d+) min measured", lambda: simulate.DEFAULTS["duration"]),
        ("README.md", r"^([\d,]+) by default\):", lambda: ShadowSettings().keep),
        ("README.md", r"`shadow.exceedanceWindow` \((\d+) minutes by default\)",
         lambda: ShadowSettings().exceedance_window / 60),
        ("docs/operating.md", r"series, ([\d,]+) by default, so",
         lambda: PrometheusSettings().child_process_above),
        ("docs/operating.md", r"\(0\.1 core / ([\d.]+) ms\)", lambda: _operating_cpu_ms(1)),
        ("docs/operating.md", r"\(0\.1 / ([\d.]+) ms\)", lambda: _operating_cpu_ms(2)),
        ("docs/operating.md", r"to (v[\d.]+) \(the header says so\)",
         lambda: render.SCHEDULER_VERSION),
        (chart_readme, r"pins\nkube-scheduler to (v[\d.]+)", lambda: render.SCHEDULER_VERSION),
        (chart_readme, r"\*\*([\d,]+) at 15,000 nodes\*\*", _chart_series_at_15000),
        (values, r"per replica: [\d,]+ at 1,000 nodes, ([\d,]+) at 15,000",
         _chart_series_at_15000),
    ]  # fmt: skip


def _load_render() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stated_problems() -> list[str]:
    problems = []
    for doc, pattern, code in _stated():
        text = (ROOT / doc).read_text(encoding="utf-8")
        found = re.findall(pattern, text, re.MULTILINE)
        if not found:
            problems.append(f"{doc}: nothing matches {pattern!r} (reworded? update the list)")
        for stated in found:
            value = code()
            number = stated.replace(",", "")
            same = same_value(number, value) if isinstance(value, int | float) else stated == value
            if not same:
                problems.append(f"{doc}: states {stated} ({pattern!r}), the code has {value!r}")
    return problems


def test_every_default_stated_in_prose_is_the_codes() -> None:
    assert stated_problems() == []


def test_operating_md_sizes_cpu_from_its_own_table() -> None:
    """The CPU bullet's pods a second are 100m / the table's CPU per pod."""
    text = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    bullet = text.split("- **CPU.** ", 1)[1].split("\n- ", 1)[0]
    stated = [int(n) for n in re.findall(r"about (\d+)", bullet)]
    assert stated == [round(100 / _operating_cpu_ms(1)), round(100 / _operating_cpu_ms(2))]


_HELM = re.compile(r"^\s*>?\s*(helm (?:install|upgrade)\b.*?)(?<!\\)$", re.MULTILINE | re.DOTALL)
_EXAMPLE_VARIABLES = {"$REGISTRY": "registry.example.com/platform"}


def helm_examples() -> list[tuple[str, list[str]]]:
    """(where, the --set expressions) of every `helm install`/`helm upgrade` of the chart in
    the docs (a fenced block's lines joined at their trailing backslashes)."""
    out = []
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        joined = re.sub(r"\\\n\s*>?\s*", " ", text)
        for number, line in enumerate(joined.splitlines(), 1):
            command = line.strip().lstrip(">").strip()
            if not re.match(r"helm (install|upgrade)\b.*deploy/helm/decice-extender", command):
                continue
            sets = re.findall(r"--set ('[^']*'|\S+)", command)
            for name, value in _EXAMPLE_VARIABLES.items():
                sets = [s.replace(name, value) for s in sets]
            out.append((f"{path.relative_to(ROOT)}~{number}", [s.strip("'") for s in sets]))
    return out


def test_every_helm_example_of_the_docs_renders() -> None:
    """What a reader pastes renders: each example's --set values (Helm's own parser)
    on the chart's defaults."""
    import helm_python as helm

    examples = helm_examples()
    assert len(examples) >= 5, examples
    render = _load_render()
    for where, sets in examples:
        values: dict[str, Any] = {}
        for expression in sets:
            values = deep_merge(values, helm.parse_set_string(expression))
        try:
            render.render_chart(values, operator_crds=False)
        except helm.HelmError as exc:
            pytest.fail(f"{where}: {' '.join(sets)}: {exc}")


def deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


_MODULE_TOKEN = re.compile(r"[a-z_][a-z0-9_]*/?")
"""A backticked module or nested package name in the README's Layout (`engine`, `client/`)."""


def layout_rows() -> dict[str, str]:
    """The README's Layout table: `extender/<subpackage>/` -> its 'what' cell."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Layout\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("| `extender/"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            name = cells[0].strip("`").removeprefix("extender/").rstrip("/")
            assert name not in rows, f"README Layout: {name} has two rows"
            rows[name] = cells[1]
    return rows


def tree_names(subpackage: Path) -> list[str]:
    """What a Layout row must name: each module's name (nested ones too) and each nested
    subpackage as `name/`, once per file."""
    names: list[str] = []
    for path in sorted(subpackage.rglob("*.py")):
        if path.name != "__init__.py":
            names.append(path.stem)
        elif path.parent != subpackage:
            names.append(f"{path.parent.name}/")
    return names


def test_the_readme_layout_names_every_module_once() -> None:
    """One row per subpackage; a row names each of its modules and nested subpackages as
    many times as the tree has them (once, unless two share a name), and no module name
    the tree lacks (a renamed or removed module's old name fails here)."""
    package = ROOT / "extender"
    subpackages = sorted(p.parent.name for p in package.glob("*/__init__.py"))
    rows = layout_rows()
    assert sorted(rows) == subpackages
    for name in subpackages:
        expected = tree_names(package / name)
        named = [t for t in re.findall(r"`([^`]+)`", rows[name]) if _MODULE_TOKEN.fullmatch(t)]
        problems = {
            t: (named.count(t), expected.count(t))
            for t in set(named) | set(expected)
            if named.count(t) != expected.count(t)
        }
        assert not problems, f"README Layout, extender/{name}/: (named, in the tree) {problems}"
    top = sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Layout\n", 1)[1]
    for module in top:
        assert f"`extender/{module}`" in text, f"README Layout does not name extender/{module}"


def test_the_package_map_names_each_nested_subpackage_in_its_parent() -> None:
    """extender.PACKAGES names every subpackage (tests/test_architecture.py); a subpackage
    nested in one is named, once, in its parent's `what`."""
    import extender

    package = ROOT / "extender"
    for init in sorted(package.glob("*/*/__init__.py")):
        parent, nested = init.parent.parent.name, init.parent.name
        what = extender.PACKAGES[parent].what
        assert what.count(f"{nested}/") == 1, f"PACKAGES[{parent!r}] names {nested}/ not once"
