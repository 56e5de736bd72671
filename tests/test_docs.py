"""The documentation stays complete and its links stay good as the code grows.

- every key of the settings models is in the configuration reference, in its section, with
  its real default;
- every page of ``docs/`` is in the site's nav and every nav entry exists;
- every relative link and anchor of ``README.md`` and ``docs/*.md`` resolves the way GitHub
  renders them (the site uses the same heading ids);
- every option of the terminal programs is documented on its page;
- the extras table names every extra and its packages, and the pages name every step of the
  test command (the code blocks themselves are run by ``tests/test_doc_blocks.py`` and, the
  shell ones, ``tests/test_doc_commands.py``);
- the site builds with ``mkdocs build --strict`` and makes no network request.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.config import (
    AppConfig,
    BrowserSettings,
    CompactionSettings,
    DaytonaSettings,
    LimitsSettings,
    LLMSettings,
    MCPServerConfig,
    MCPSettings,
    ModelPrice,
    ProxySettings,
    RunflowSettings,
    SandboxSettings,
    SearchSettings,
    TracingSettings,
    WebSettings,
)
from app.testing.netguard import SITE_DIR

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS_YML = ROOT / "mkdocs.yml"
CONFIG_PAGE = DOCS / "configuration.md"

#: Each settings model, the heading (its start) of its section in the configuration
#: reference, and fields documented elsewhere (``servers`` comes from mcp.json).
SECTIONS: dict[type[BaseModel], tuple[str, frozenset[str]]] = {
    LLMSettings: ("## `[llm]`", frozenset()),
    BrowserSettings: ("## `[browser]`", frozenset()),
    ProxySettings: ("## `[browser]`", frozenset()),
    SearchSettings: ("## `[search]`", frozenset()),
    SandboxSettings: ("## `[sandbox]`", frozenset()),
    MCPSettings: ("## `[mcp]`", frozenset({"servers"})),
    MCPServerConfig: ("## `[mcp]`", frozenset()),
    RunflowSettings: ("## `[runflow]`", frozenset()),
    WebSettings: ("## `[web]`", frozenset()),
    ModelPrice: ("## `[pricing]`", frozenset()),
    CompactionSettings: ("## `[compaction]`", frozenset()),
    LimitsSettings: ("## `[limits]`", frozenset()),
    TracingSettings: ("## `[tracing]`", frozenset()),
    DaytonaSettings: ("## `[daytona]`", frozenset()),
}
#: AppConfig fields that are not a TOML section of their own.
NOT_SECTIONS = {"llm", "workspace_root", "config_path", "pricing"}


# --- helpers ---------------------------------------------------------------------------------


def _without_code_blocks(text: str) -> str:
    """The Markdown outside fenced code blocks (links and headings there are not real)."""
    kept, fence = [], ""
    for line in text.splitlines():
        # A fence's info string has no backtick, so inline ```` ```json ```` opens nothing.
        match = re.match(r"\s*(`{3,}|~{3,})([^`]*)$", line)
        if match and not fence:
            fence = match.group(1)
        elif match and match.group(1).startswith(fence) and not match.group(2).strip():
            fence = ""
        elif not fence:
            kept.append(line)
    return "\n".join(kept)


def _section(text: str, heading: str) -> str:
    """The text under the heading that starts with ``heading``, up to the next heading of
    the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    assert start is not None, f"{CONFIG_PAGE.name} has no section starting {heading!r}"
    end = len(lines)
    for i in range(start + 1, len(lines)):
        match = re.match(r"(#+) ", lines[i])
        if match and len(match.group(1)) <= level:
            end = i
            break
    return "\n".join(lines[start:end])


def _table_rows(section: str) -> dict[str, list[str]]:
    """``key -> cells`` for the table rows of ``section`` whose first cell is `` `key` ``."""
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        match = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0]) if cells else None
        if line.startswith("|") and match:
            rows[match.group(1)] = cells
    return rows


def _toml_default(value: Any) -> set[str]:
    """How a default may be written in the reference: TOML/JSON spellings of ``value``."""
    if isinstance(value, bool):
        return {"`true`" if value else "`false`"}
    if isinstance(value, float) and value.is_integer():
        return {f"`{value}`", f"`{int(value)}`"}
    if isinstance(value, int | float):
        return {f"`{value}`"}
    if isinstance(value, str):
        return {f"`{json.dumps(value)}`"}
    return {f"`{json.dumps(value, separators=(', ', ': '))}`"}


def _github_slug(heading: str) -> str:
    """The id GitHub gives a heading (``mkdocs.yml`` makes the site use the same rule)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]*>", "", text.replace("`", "")).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for line in _without_code_blocks(page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            slug = _github_slug(match.group(1))
            assert slug not in anchors, f"{page.name}: two headings have the id #{slug}"
            anchors.add(slug)
    return anchors


def _nav_pages() -> list[str]:
    # The nav's leaves are `Title: page.md` lines; no YAML library needed.
    nav = MKDOCS_YML.read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    return re.findall(r":\s*(\S+\.md)\s*$", nav, flags=re.MULTILINE)


# --- the configuration reference ---------------------------------------------------------------


def test_every_settings_section_has_its_model_documented() -> None:
    """A new section in AppConfig must be added to SECTIONS (and so to the reference)."""
    documented = {model for model in SECTIONS}
    for name, field in AppConfig.model_fields.items():
        if name in NOT_SECTIONS:
            continue
        assert field.annotation in documented, (
            f"AppConfig.{name} ({field.annotation}) has no section in {CONFIG_PAGE.name}: "
            "document it and add it to SECTIONS"
        )
    assert ModelPrice in documented and LLMSettings in documented


@pytest.mark.parametrize("model", list(SECTIONS), ids=lambda m: m.__name__)
def test_every_config_key_is_in_the_reference_with_its_default(model: type[BaseModel]) -> None:
    heading, elsewhere = SECTIONS[model]
    section = _section(CONFIG_PAGE.read_text(encoding="utf-8"), heading)
    rows = _table_rows(section)
    for name, field in model.model_fields.items():
        if name in elsewhere:
            continue
        if model is DaytonaSettings:  # accepted and unused: listed in prose
            assert f"`{name}`" in section, f"{heading}: {name} is not mentioned"
            continue
        assert name in rows, f"{heading} has no table row for {model.__name__}.{name}"
        if field.is_required():
            continue
        default = field.get_default(call_default_factory=True)
        if default is None or isinstance(default, BaseModel | Path):
            continue  # "unset", or described in words
        cells = " | ".join(rows[name][1:])
        spellings = _toml_default(default)
        assert any(s in cells for s in spellings), (
            f"{heading} `{name}`: the default is {default!r} (one of {sorted(spellings)}), "
            f"the reference says: {cells}"
        )


def test_the_reference_documents_no_key_that_does_not_exist() -> None:
    """Every `key` row in a section's tables is a field of one of that section's models."""
    text = CONFIG_PAGE.read_text(encoding="utf-8")
    by_heading: dict[str, set[str]] = {}
    for model, (heading, _) in SECTIONS.items():
        by_heading.setdefault(heading, set()).update(model.model_fields)
    for heading, fields in by_heading.items():
        unknown = set(_table_rows(_section(text, heading))) - fields
        assert not unknown, f"{heading} documents keys that do not exist: {sorted(unknown)}"
    assert set(_table_rows(_section(text, "## Top level"))) == {"strict", "workspace_root"}


# --- the site: nav, links, anchors -------------------------------------------------------------


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    nav = _nav_pages()
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert len(nav) == len(set(nav)), f"a page is in the nav twice: {nav}"
    assert sorted(nav) == pages, (
        f"not in the nav: {sorted(set(pages) - set(nav))}; "
        f"in the nav but missing: {sorted(set(nav) - set(pages))}"
    )


def _links(page: Path) -> list[str]:
    text = _without_code_blocks(page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize(
    "page",
    [README, *sorted(DOCS.rglob("*.md"))],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    problems = []
    for link in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # https:, mailto: ...
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            problems.append(f"{link}: {path.relative_to(ROOT)} does not exist")
            continue
        if anchor and path.suffix == ".md" and anchor not in _anchors(path):
            problems.append(f"{link}: no heading with the id #{anchor} in {path.name}")
    assert not problems, f"{page.name}:\n" + "\n".join(problems)


def test_readme_shows_the_screenshot_the_web_ui_tests_refresh() -> None:
    assert "](docs/web-ui.png)" in README.read_text(encoding="utf-8")
    assert "](web-ui.png)" in (DOCS / "web-ui.md").read_text(encoding="utf-8")
    assert (DOCS / "web-ui.png").read_bytes().startswith(b"\x89PNG")


def test_readme_keeps_the_two_commands_and_ci_runs_the_test_one() -> None:
    text = README.read_text(encoding="utf-8")
    assert re.search(r"^bash scripts/run\.sh +# run the agent", text, re.MULTILINE)
    assert re.search(r"^bash scripts/test\.sh +# run the linter and the whole test", text, re.M)
    assert (ROOT / "scripts" / "run.sh").is_file()
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_sh = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert re.search(r"-m mkdocs build --strict", test_sh), "test.sh must build the docs"
    assert re.search(r"setup-venv\.sh \S*\bdocs\b", test_sh), "test.sh must install the docs extra"


# --- the set-up: extras and the test command's steps --------------------------------------------


def test_the_extras_table_lists_every_extra_with_its_packages() -> None:
    """getting-started.md's table: one row per extra of pyproject.toml, naming each package."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    section = _section((DOCS / "getting-started.md").read_text(encoding="utf-8"), "### Extras")
    rows = {name: " | ".join(cells[1:3]).lower() for name, cells in _table_rows(section).items()}
    for extra, requirements in extras.items():
        assert extra in rows, f"getting-started.md's extras table has no row for {extra!r}"
        for requirement in requirements:
            package = re.match(r"[A-Za-z0-9._-]+", requirement)
            assert package is not None
            name = package.group(0).lower()
            assert name in rows[extra] or name.replace("-", "_") in rows[extra], (
                f"the {extra!r} row does not name {name}"
            )


def _test_sh_steps() -> set[str]:
    """The checks scripts/test.sh runs, as ``tool subcommand`` (``ruff format``, ``mypy``)."""
    steps = set()
    for line in (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or '"$VENV/bin/' not in line:
            continue
        if match := re.search(r'bin/python" -m (\w+)(?: (build|check|format))?', line):
            steps.add(" ".join(filter(None, match.groups())))
        elif match := re.search(r'bin/([\w-]+)"', line):
            steps.add(match.group(1))
    return steps


@pytest.mark.parametrize(
    "page", [README, DOCS / "getting-started.md", DOCS / "testing.md"], ids=lambda p: p.name
)
def test_the_pages_name_every_step_of_the_test_command(page: Path) -> None:
    steps = _test_sh_steps()
    assert {"ruff check", "ruff format", "mypy", "lint-imports", "mkdocs build", "pytest"} <= steps
    text = page.read_text(encoding="utf-8")
    missing = sorted(step for step in steps if step not in text)
    assert not missing, f"{page.name} does not say that scripts/test.sh runs {missing}"


# --- the terminal programs' options --------------------------------------------------------------

PROGRAMS = {
    "main.py": ["main.py"],
    "run_flow.py": ["run_flow.py"],
    "run_mcp.py": ["run_mcp.py"],
    "app.mcp.server": ["-m", "app.mcp.server"],
    "app.batch": ["-m", "app.batch"],
    "app.web": ["-m", "app.web"],
    "bench": ["-m", "bench"],
    "protocol.a2a.app.main": ["-m", "protocol.a2a.app.main"],
}
PAGES = {
    "main.py": "getting-started.md",
    "run_flow.py": "flows.md",
    "run_mcp.py": "mcp.md",
    "app.mcp.server": "mcp.md",
    "app.batch": "batch.md",
    "app.web": "web-ui.md",
    "bench": "performance.md",
    "protocol.a2a.app.main": "a2a.md",
}


@pytest.mark.e2e
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_every_option_of_a_program_is_documented_on_its_page(program: str) -> None:
    result = subprocess.run(
        [sys.executable, *PROGRAMS[program], "--help"],
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout)) - {"--help"}
    assert len(options) >= 3, result.stdout  # the help was really read
    page = (DOCS / PAGES[program]).read_text(encoding="utf-8")
    missing = sorted(o for o in options if not re.search(rf"(?<![\w-]){o}(?![\w-])", page))
    assert not missing, f"{PAGES[program]} does not document {program}'s {missing}"


# --- the build ------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_site_builds_strictly_without_the_network(tmp_path: Path) -> None:
    """``mkdocs build --strict`` with every connection outside 127.0.0.1 refused (the network
    guard in the child): no Google fonts, no social cards, no warning of any kind."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([SITE_DIR, str(ROOT)]),
        "OPENMANUS_BLOCK_NETWORK": "1",
        "NO_MKDOCS_2_WARNING": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    output = result.stdout + result.stderr
    assert "No module named mkdocs" not in output, (
        "mkdocs is missing: install the docs extra (pip install -e '.[docs]'; scripts/test.sh does)"
    )
    assert result.returncode == 0, output
    assert "WARNING" not in output and "NetworkBlocked" not in output, output
    for page in _nav_pages():
        built = tmp_path / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), f"{page} was not built"
    assert (tmp_path / "web-ui.png").is_file()
    assert (tmp_path / "search" / "search_index.json").is_file()
