"""Upstream compatibility: upstream's ``sandbox_files`` tool (files inside a Daytona sandbox):
building it raises a clear "not supported" error (see :mod:`app.daytona`)."""

from __future__ import annotations

from typing import TypeVar

from app.daytona.tool_base import SandboxToolsBase

__all__ = ["Context", "SandboxFilesTool"]

Context = TypeVar("Context")


class SandboxFilesTool(SandboxToolsBase):
    name: str = "sandbox_files"
    description: str = "Works with files inside a Daytona cloud sandbox (not supported here)."
