"""Helpers for the sandbox tests: build a backend with small limits, find leftovers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.config_models import SandboxSettings
from app.sandbox.base import Sandbox
from app.sandbox.factory import create_sandbox

__all__ = ["BACKENDS", "make_sandbox", "processes_under", "requires_bwrap"]

requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap is not installed (scripts/test.sh installs it)"
)
BACKENDS = [pytest.param("local"), pytest.param("bubblewrap", marks=requires_bwrap)]


def make_sandbox(backend: str, workspace: Path, **settings: Any) -> Sandbox:
    values: dict[str, Any] = {"backend": backend, "memory_limit": "256m", "timeout": 30}
    values.update(settings)
    return create_sandbox(SandboxSettings(**values), workspace)


def processes_under(directory: Path, command: str | None = None) -> list[int]:
    """Live processes whose working directory is ``directory`` or below (any namespace),
    optionally only those whose command line contains ``command``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        if cwd == str(directory) or cwd.startswith(str(directory) + "/"):
            if command is not None:
                try:
                    cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                if command.encode() not in cmdline:
                    continue
            found.append(int(name))
    return found
