"""Upstream compatibility: re-exports upstream's ``app.tool.sandbox.sb_shell_tool`` from
:mod:`app.compat.tool.sandbox.sb_shell_tool`."""

from app.compat.tool.sandbox.sb_shell_tool import Context, SandboxShellTool

__all__ = ["Context", "SandboxShellTool"]
