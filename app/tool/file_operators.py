"""Upstream compatibility: re-exports upstream's ``app.tool.file_operators`` from
:mod:`app.compat.tool.file_operators`."""

from app.compat.tool.file_operators import (
    FileOperator,
    LocalFileOperator,
    PathLike,
    SandboxFileOperator,
)

__all__ = ["FileOperator", "LocalFileOperator", "PathLike", "SandboxFileOperator"]
