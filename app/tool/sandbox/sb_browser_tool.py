"""Upstream compatibility: re-exports upstream's ``app.tool.sandbox.sb_browser_tool`` from
:mod:`app.compat.tool.sandbox.sb_browser_tool`."""

from app.compat.tool.sandbox.sb_browser_tool import SandboxBrowserTool

__all__ = ["SandboxBrowserTool"]
