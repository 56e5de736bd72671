"""Upstream compatibility: upstream's sandbox exceptions (ours, in :mod:`app.exceptions`), and
the error of a full :class:`~app.compat.sandbox.core.manager.SandboxManager` (also a
``RuntimeError``)."""

from app.exceptions import SandboxError, SandboxResourceError, SandboxTimeoutError

__all__ = ["SandboxError", "SandboxLimitError", "SandboxResourceError", "SandboxTimeoutError"]


class SandboxLimitError(SandboxResourceError, RuntimeError):
    """``max_sandboxes`` are running; upstream's callers catch it as ``RuntimeError``."""
