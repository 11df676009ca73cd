"""README.md stays a front door, and every relative link in it and in docs/ resolves.

A link's anchor is checked against the target's headings, slugged as GitHub slugs them: the heading's
text without markup, lower-cased, every character that is not a letter, digit, space, hyphen or
underscore dropped, spaces turned into hyphens, and a repeated slug suffixed -1, -2, ...
Ref: https://docs.github.com/en/get-started/writing-on-github/getting-started-with-writing-and-formatting-on-github/basic-writing-and-formatting-syntax#section-links
"""

from __future__ import annotations

import re
from pathlib import Path

import paths
import pytest

ROOT = paths.REPO
README = ROOT / "README.md"
README_MAX_LINES = 200
PAGES = sorted([README, *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+).*?\1")
ISSUE_REF = re.compile(r"\bissue\s+#?\d+|\(issue\b", re.IGNORECASE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, CODE_SPAN.sub("", line)))
    return out


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "").replace("~~", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m is None:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    text = page.read_text(encoding="utf-8")
    problems = []
    for number, line in prose_lines(text):
        for target in LINK.findall(line):
            if EXTERNAL.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{where}: no heading with that anchor")
    return problems


def test_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers(page: Path) -> None:
    hits = [f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
            for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
            if ISSUE_REF.search(line)]
    assert hits == [], "name a public document, or nothing"


@pytest.mark.parametrize(("heading", "expected"), [
    ("Secrets you create", "secrets-you-create"),
    ("Install with Helm", "install-with-helm"),
    ("Node health: prolog, epilog, HealthCheckProgram", "node-health-prolog-epilog-healthcheckprogram"),
    ("Keeping it current (`sync.plan`, for the controller)", "keeping-it-current-syncplan-for-the-controller"),
    ("At the controller (cluster.yaml `topologyPlugin` + `topology:`)",
     "at-the-controller-clusteryaml-topologyplugin--topology"),
    ("Pod lifecycle: probes, preStop, reconcile, node-reaper", "pod-lifecycle-probes-prestop-reconcile-node-reaper"),
    ("**Bold** and [a link](x.md)", "bold-and-a-link"),
    ("Where this shape differs from the target design and why",
     "where-this-shape-differs-from-the-target-design-and-why"),
    ("snake_case_name", "snake_case_name"),
])
def test_slug_follows_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_repeated_headings_get_suffixes() -> None:
    assert anchors("# A\n## A\n```\n# A\n```\n### A\n") == {"a", "a-1", "a-2"}


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Real heading\n", encoding="utf-8")
    page.write_text("[ok](other.md#real-heading) [gone](missing.md) [bad](other.md#nope) "
                    "[self](#top) `[code](missing.md)`\n\n# Top\n", encoding="utf-8")
    assert [p.split(": ", 1)[1] for p in broken_links(page, tmp_path)] == [
        "missing.md: no such file", "other.md#nope: no heading with that anchor"]
