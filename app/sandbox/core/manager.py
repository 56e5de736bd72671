"""Upstream compatibility: re-exports upstream's ``app.sandbox.core.manager`` from
:mod:`app.compat.sandbox.core.manager`."""

from app.compat.sandbox.core.manager import SandboxManager

__all__ = ["SandboxManager"]
