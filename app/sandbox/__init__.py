"""Where model-written code runs: ``local`` (rlimits), ``bubblewrap`` (namespaces) or
``docker`` (a container), chosen by ``[sandbox] backend``. Names import on first use."""

from __future__ import annotations

from app._lazy import lazy_getattr

__all__ = [
    "BubblewrapSandbox",
    "DockerSandbox",
    "ExecResult",
    "LaunchSpec",
    "LocalSandbox",
    "Sandbox",
    "SandboxLimits",
    "create_sandbox",
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
}

__getattr__ = lazy_getattr(__name__, _LOCATIONS)
