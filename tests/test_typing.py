"""What the package promises type checkers: names that load lazily are still visible to them,
and the built package carries the ``py.typed`` marker (PEP 561). mypy itself runs in
``scripts/test.sh``."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import app

ROOT = Path(__file__).resolve().parent.parent
APP = Path(app.__file__).resolve().parent


def _has_module_getattr(init: Path) -> bool:
    """Whether the module itself defines ``__getattr__`` (PEP 562), not a class in it."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__getattr__" for target in node.targets
        ):
            return True
    return False


LAZY_PACKAGES = sorted(init for init in APP.rglob("__init__.py") if _has_module_getattr(init))


def _module_name(init: Path) -> str:
    return ".".join(init.parent.relative_to(APP.parent).parts)


def _typed_names(init: Path) -> dict[str, str]:
    """Name -> defining module, for what a checker sees: top-level imports and those under
    ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        statements = [node]
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            statements = node.body
        for statement in statements:
            if isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
                for alias in statement.names:
                    found[alias.asname or alias.name] = str(statement.module)
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                found[statement.target.id] = ""  # declared here, computed on access
    return found


def test_the_framework_packages_import_their_names_at_the_top():
    """Lazy names are for optional extras or a measured cost only (``app.agent`` and
    ``app.tool``: see their docstrings); the other packages import theirs."""
    names = {_module_name(init) for init in LAZY_PACKAGES}
    eager = {"app.flow", "app.cli", "app.batch", "app.testing", "app.web", "app.tool.chart"}
    assert not names & eager, sorted(names & eager)
    assert {"app.agent", "app.tool"} <= names


def test_every_lazy_name_is_visible_to_type_checkers():
    for init in LAZY_PACKAGES:
        package = importlib.import_module(_module_name(init))
        typed = _typed_names(init)
        hidden = sorted(set(package.__all__) - set(typed))
        assert not hidden, f"{package.__name__}: add to its `if TYPE_CHECKING:` imports: {hidden}"
        for name in package.__all__:
            if not typed[name]:
                continue  # a declared name (``WORKSPACE_ROOT: Path``), not an import
            # What the checker was told is what the package hands out at run time.
            assert getattr(package, name) is getattr(importlib.import_module(typed[name]), name)


@pytest.mark.e2e
def test_the_built_package_ships_py_typed(tmp_path: Path):
    # Build the package's files the way a wheel gets them (setuptools' build_py, reading
    # pyproject.toml), from a copy so the checkout gets no build leftovers.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(APP, source / "app", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import setuptools; setuptools.setup()",
            "-q",
            "build_py",
            "-d",
            out,
        ],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (out / "app" / "__init__.py").is_file()
    marker = out / "app" / "py.typed"
    assert marker.is_file() and marker.read_bytes() == b""
