"""Where model-written code runs: ``local`` (rlimits), ``bubblewrap`` (namespaces) or
``docker`` (a container), chosen by ``[sandbox] backend``. Names import on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.exceptions import SandboxError, SandboxResourceError, SandboxTimeoutError
from app.sandbox.environment import scrub_environment
from app.sandbox.factory import create_sandbox

if TYPE_CHECKING:
    from app.compat.sandbox.client import (
        BaseSandboxClient,
        LocalSandboxClient,
        create_sandbox_client,
    )
    from app.compat.sandbox.core.manager import SandboxManager
    from app.sandbox.base import ExecResult, LaunchSpec, Sandbox, SandboxLimits
    from app.sandbox.bubblewrap import BubblewrapSandbox
    from app.sandbox.docker import DockerSandbox
    from app.sandbox.local import LocalSandbox

__all__ = [
    "BaseSandboxClient",
    "BubblewrapSandbox",
    "DockerSandbox",
    "ExecResult",
    "LaunchSpec",
    "LocalSandbox",
    "LocalSandboxClient",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxManager",
    "SandboxResourceError",
    "SandboxTimeoutError",
    "create_sandbox",
    "create_sandbox_client",
    "scrub_environment",
]


def __getattr__(name: str) -> object:
    """A name's module, imported on first use; each import written out for import-linter."""
    if name == "BubblewrapSandbox":
        from app.sandbox import bubblewrap

        return getattr(bubblewrap, name)
    if name == "DockerSandbox":
        from app.sandbox import docker

        return getattr(docker, name)
    if name in ("ExecResult", "LaunchSpec", "Sandbox", "SandboxLimits"):
        from app.sandbox import base

        return getattr(base, name)
    if name == "LocalSandbox":
        from app.sandbox import local

        return getattr(local, name)
    if name in ("BaseSandboxClient", "LocalSandboxClient", "create_sandbox_client"):
        from app.compat.sandbox import client  # upstream's names (docs/upstream.md)

        return getattr(client, name)
    if name == "SandboxManager":
        from app.compat.sandbox.core import manager  # upstream's name

        return getattr(manager, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
