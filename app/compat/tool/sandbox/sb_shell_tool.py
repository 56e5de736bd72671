"""Upstream compatibility: ``sandbox_shell`` (Daytona); building it raises "not supported"."""

from __future__ import annotations

from typing import TypeVar

from app.compat.daytona.tool_base import SandboxToolsBase

__all__ = ["Context", "SandboxShellTool"]

Context = TypeVar("Context")


class SandboxShellTool(SandboxToolsBase):
    name: str = "sandbox_shell"
    description: str = "Works with a shell inside a Daytona cloud sandbox (not supported here)."
