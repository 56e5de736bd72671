"""Upstream compatibility: ``sandbox_browser`` (Daytona); building it raises "not supported"."""

from __future__ import annotations

from app.compat.daytona.tool_base import SandboxToolsBase

__all__ = ["SandboxBrowserTool"]


class SandboxBrowserTool(SandboxToolsBase):
    name: str = "sandbox_browser"
    description: str = "Works with a browser inside a Daytona cloud sandbox (not supported here)."
