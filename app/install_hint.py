"""The install command to show when an optional extra is missing, naming the pip of the
environment actually running (``.venv/bin/pip`` after ``scripts/run.sh``), so copying it
installs into the right place."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from app.config import PROJECT_ROOT

__all__ = ["pip_command", "pip_install"]


def pip_command() -> str:
    """``.venv/bin/pip`` (relative when inside the project), else the running venv's pip."""
    if sys.prefix == sys.base_prefix:
        return f"{Path(sys.executable).name} -m pip"
    pip = Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin") / "pip"
    try:
        return str(pip.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(pip)


def pip_install(extra: str) -> str:
    """``cd <project> && .venv/bin/pip install -e '.[extra]'``-style command for one extra."""
    command = f"{pip_command()} install -e '.[{extra}]'"
    if Path.cwd().resolve() != PROJECT_ROOT:
        return f"cd {PROJECT_ROOT} && {command}"
    return command
