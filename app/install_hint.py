"""The install command to show when an optional extra is missing, naming the pip of the
environment actually running (``.venv/bin/pip`` after ``scripts/run.sh``), so copying it
installs into the right place."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from app.config import PROJECT_ROOT


def pip_install(extra: str) -> str:
    """``cd <project> && .venv/bin/pip install -e '.[extra]'``-style command for one extra."""
    if sys.prefix == sys.base_prefix:
        pip = f"{Path(sys.executable).name} -m pip"
    else:
        path = Path(sys.prefix) / ("Scripts" if os.name == "nt" else "bin") / "pip"
        pip = str(path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path)
    command = f"{pip} install -e '.[{extra}]'"
    if Path.cwd().resolve() != PROJECT_ROOT:
        return f"cd {PROJECT_ROOT} && {command}"
    return command
