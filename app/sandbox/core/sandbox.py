"""Upstream compatibility: re-exports upstream's ``app.sandbox.core.sandbox`` from
:mod:`app.compat.sandbox.core.sandbox`."""

from app.compat.sandbox.core.sandbox import (
    DockerSandbox,
    SandboxSettings,
    UpstreamSandbox,
    copy_out,
)

__all__ = ["DockerSandbox", "SandboxSettings", "UpstreamSandbox", "copy_out"]
