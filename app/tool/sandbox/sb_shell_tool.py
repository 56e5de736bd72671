"""Upstream compatibility: upstream's ``sandbox_shell`` tool (a shell inside a Daytona sandbox):
building it raises a clear "not supported" error (see :mod:`app.daytona`)."""

from __future__ import annotations

from typing import TypeVar

from app.daytona.tool_base import SandboxToolsBase

__all__ = ["Context", "SandboxShellTool"]

Context = TypeVar("Context")


class SandboxShellTool(SandboxToolsBase):
    name: str = "sandbox_shell"
    description: str = "Works with a shell inside a Daytona cloud sandbox (not supported here)."
