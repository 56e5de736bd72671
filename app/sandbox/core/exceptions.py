"""Upstream compatibility: re-exports upstream's ``app.sandbox.core.exceptions`` from
:mod:`app.compat.sandbox.core.exceptions`."""

from app.compat.sandbox.core.exceptions import (
    SandboxError,
    SandboxLimitError,
    SandboxResourceError,
    SandboxTimeoutError,
)

__all__ = ["SandboxError", "SandboxLimitError", "SandboxResourceError", "SandboxTimeoutError"]
