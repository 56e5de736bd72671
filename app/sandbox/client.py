"""Upstream compatibility: re-exports upstream's ``app.sandbox.client`` from
:mod:`app.compat.sandbox.client`."""

from app.compat.sandbox.client import (
    SANDBOX_CLIENT,
    BaseSandboxClient,
    LocalSandboxClient,
    SandboxFileOperations,
    create_sandbox_client,
    open_sandbox,
)

__all__ = [
    "SANDBOX_CLIENT",
    "BaseSandboxClient",
    "LocalSandboxClient",
    "SandboxFileOperations",
    "create_sandbox_client",
    "open_sandbox",
]
