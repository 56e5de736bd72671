"""Upstream compatibility: ``sandbox_files`` (Daytona); building it raises "not supported"."""

from __future__ import annotations

from typing import TypeVar

from app.compat.daytona.tool_base import SandboxToolsBase

__all__ = ["Context", "SandboxFilesTool"]

Context = TypeVar("Context")


class SandboxFilesTool(SandboxToolsBase):
    name: str = "sandbox_files"
    description: str = "Works with files inside a Daytona cloud sandbox (not supported here)."
