"""Upstream's sandbox exceptions: the ones in :mod:`app.exceptions`, plus the error for a full
:class:`~app.sandbox.core.manager.SandboxManager` (a ``RuntimeError`` too, as upstream raised)."""

from app.exceptions import SandboxError, SandboxResourceError, SandboxTimeoutError

__all__ = ["SandboxError", "SandboxLimitError", "SandboxResourceError", "SandboxTimeoutError"]


class SandboxLimitError(SandboxResourceError, RuntimeError):
    """``max_sandboxes`` are running; upstream's callers catch it as ``RuntimeError``."""
