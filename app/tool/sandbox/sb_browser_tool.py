"""Upstream compatibility: upstream's ``sandbox_browser`` tool (a browser inside a Daytona
sandbox): building it raises a clear "not supported" error (see :mod:`app.daytona`)."""

from __future__ import annotations

from app.daytona.tool_base import SandboxToolsBase

__all__ = ["SandboxBrowserTool"]


class SandboxBrowserTool(SandboxToolsBase):
    name: str = "sandbox_browser"
    description: str = "Works with a browser inside a Daytona cloud sandbox (not supported here)."
