"""Every Markdown link of the README and docs resolves: files exist, #anchors name a heading.

Links to the web are not fetched (no network here); their form is checked.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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
