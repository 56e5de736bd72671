"""Where model-written code runs: ``local`` (rlimits), ``bubblewrap`` (namespaces) or
``docker`` (a container), chosen by ``[sandbox] backend``. Names import on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.exceptions import SandboxError, SandboxResourceError, SandboxTimeoutError
    from app.sandbox.base import ExecResult, LaunchSpec, Sandbox, SandboxLimits
    from app.sandbox.bubblewrap import BubblewrapSandbox
    from app.sandbox.client import BaseSandboxClient, LocalSandboxClient, create_sandbox_client
    from app.sandbox.core.manager import SandboxManager
    from app.sandbox.docker import DockerSandbox
    from app.sandbox.environment import scrub_environment
    from app.sandbox.factory import create_sandbox
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

_LOCATIONS = {
    "BubblewrapSandbox": "app.sandbox.bubblewrap",
    "DockerSandbox": "app.sandbox.docker",
    "ExecResult": "app.sandbox.base",
    "LaunchSpec": "app.sandbox.base",
    "LocalSandbox": "app.sandbox.local",
    "Sandbox": "app.sandbox.base",
    "SandboxLimits": "app.sandbox.base",
    "create_sandbox": "app.sandbox.factory",
    "scrub_environment": "app.sandbox.environment",
    # upstream's names (its client API, mapped onto the backends above)
    "BaseSandboxClient": "app.sandbox.client",
    "LocalSandboxClient": "app.sandbox.client",
    "SandboxManager": "app.sandbox.core.manager",
    "SandboxError": "app.exceptions",
    "SandboxResourceError": "app.exceptions",
    "SandboxTimeoutError": "app.exceptions",
    "create_sandbox_client": "app.sandbox.client",
}

__getattr__ = lazy_getattr(__name__, _LOCATIONS)
