"""Upstream's sandbox exceptions; they are the ones in :mod:`app.exceptions`."""

from app.exceptions import SandboxError, SandboxResourceError, SandboxTimeoutError

__all__ = ["SandboxError", "SandboxResourceError", "SandboxTimeoutError"]
