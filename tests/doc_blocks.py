"""The fenced code blocks of README.md and docs/*.md, as the doc tests read them.

One convention (docs/testing.md, "Code blocks in the docs"): every block names its language;
``text`` (output, a diagram, a layout) and ``markdown`` are never run; a block of any other
language is run by the tests (``tests/test_doc_blocks.py`` for Python, JavaScript, TOML and
JSON, ``tests/test_doc_commands.py`` for shell) unless an HTML comment on the line before it
says

- ``<!-- doc: not run: <why> -->``: shown only (a fragment, a command that installs or runs
  the test suite itself); the reason is required;
- ``<!-- doc: continues -->``: runs after the block of the same language before it, in the
  same interpreter and namespace (a set-up block, then a block that uses it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES: tuple[Path, ...] = (ROOT / "README.md", *sorted(DOCS.glob("*.md")))

#: Languages the tests run, and those shown only: ``text`` (output, diagrams, layouts) and
#: ``markdown`` (how a page is written, in docs/testing.md).
RUN_LANGUAGES = frozenset({"python", "bash", "javascript", "toml", "json"})
LANGUAGES = RUN_LANGUAGES | {"text", "markdown"}

FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
MARKER = re.compile(r"^<!--\s*doc:\s*(?P<kind>[a-z ]+?)\s*(?::\s*(?P<why>.*?))?\s*-->$")
NOT_RUN, CONTINUES = "not run", "continues"


@dataclass(frozen=True)
class DocBlock:
    """One fenced block: its page (relative to the checkout), first line (the fence's),
    language, text, and the marker on the line before it (``""``: none)."""

    page: str
    line: int
    language: str
    text: str
    marker: str = ""
    why: str = ""
    marker_error: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.marker != NOT_RUN


def fenced_blocks(page: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(first line number, language, lines) of each fenced block of ``page``."""
    fence, language, start, lines = "", "", 0, []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line.strip())
        if not fence and match:
            fence, language, start, lines = match.group(1), match.group(2), number, []
        elif fence and line.strip() == fence:
            yield start, language, lines
            fence = ""
        elif fence:
            lines.append(line)


def page_blocks(page: Path, name: str | None = None) -> list[DocBlock]:
    """Every fenced block of ``page`` (called ``name``: its path in the checkout) with its
    marker."""
    name = name or page.relative_to(ROOT).as_posix()
    source = page.read_text(encoding="utf-8").splitlines()
    found = []
    for start, language, lines in fenced_blocks(page):
        indent = len(source[start - 1]) - len(source[start - 1].lstrip())
        text = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines)
        before = source[start - 2].strip() if start >= 2 else ""
        marker = why = problem = ""
        if before.startswith("<!--") and "doc:" in before:
            match = MARKER.match(before)
            if match is None or match.group("kind") not in (NOT_RUN, CONTINUES):
                problem = f"unknown marker {before!r}"
            else:
                marker, why = match.group("kind"), match.group("why") or ""
                if marker == NOT_RUN and not why:
                    problem = "`doc: not run` needs a reason: <!-- doc: not run: why -->"
        found.append(DocBlock(name, start, language, text + "\n", marker, why, problem))
    return found


ALL_BLOCKS: list[DocBlock] = [block for page in PAGES for block in page_blocks(page)]


def chains(language: str, blocks: list[DocBlock] | None = None) -> list[tuple[DocBlock, ...]]:
    """The run units of ``language`` (in ``blocks``, default: every page's): each block that
    runs, with the ``continues`` blocks after it (a ``continues`` block with no block to
    continue stands alone, and :func:`convention_problems` reports it)."""
    units: list[list[DocBlock]] = []
    for block in ALL_BLOCKS if blocks is None else blocks:
        if block.language != language or not block.runs:
            continue
        if block.marker == CONTINUES and units and units[-1][-1].page == block.page:
            units[-1].append(block)
        else:
            units.append([block])
    return [tuple(unit) for unit in units]


def convention_problems(blocks: list[DocBlock]) -> list[str]:
    """What breaks the convention in ``blocks`` (one page's, in order)."""
    problems = []
    previous: dict[str, DocBlock] = {}
    for block in blocks:
        if block.marker_error:
            problems.append(f"{block.id}: {block.marker_error}")
        if block.language not in LANGUAGES and block.marker != NOT_RUN:
            problems.append(
                f"{block.id}: a block names its language ({', '.join(sorted(LANGUAGES))}), "
                f"or is marked <!-- doc: not run: why -->; "
                f"this one says {block.language or 'nothing'}"
            )
        if block.marker == CONTINUES:
            before = previous.get(block.language)
            if before is None or not before.runs:
                problems.append(f"{block.id}: `doc: continues` follows no {block.language} block")
        previous[block.language] = block
    return problems
