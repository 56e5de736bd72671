"""Upstream compatibility: re-exports upstream's ``app.tool.sandbox.sb_files_tool`` from
:mod:`app.compat.tool.sandbox.sb_files_tool`."""

from app.compat.tool.sandbox.sb_files_tool import Context, SandboxFilesTool

__all__ = ["Context", "SandboxFilesTool"]
