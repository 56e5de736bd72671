"""Upstream compatibility: re-exports upstream's ``app.sandbox.core.terminal`` from
:mod:`app.compat.sandbox.core.terminal`."""

from app.compat.sandbox.core.terminal import AsyncDockerizedTerminal, DockerSession

__all__ = ["AsyncDockerizedTerminal", "DockerSession"]
