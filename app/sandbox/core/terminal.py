"""Upstream's interactive Docker terminal classes. They were internals of its Docker sandbox;
here commands run through :meth:`app.sandbox.base.Sandbox.run` and the ``bash`` tool keeps a
persistent shell, so building these raises a clear error pointing there."""

from __future__ import annotations

from typing import Any

from app.exceptions import UnsupportedFeatureError

__all__ = ["AsyncDockerizedTerminal", "DockerSession"]

_MESSAGE = (
    "{name} (upstream's docker exec terminal) is not provided: run commands with "
    "app.sandbox.core.sandbox.DockerSandbox(...).run_command(), app.sandbox.create_sandbox()"
    ".run(), or the bash tool (a persistent shell in the [sandbox] backend)"
)


class DockerSession:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeatureError(_MESSAGE.format(name="DockerSession"))


class AsyncDockerizedTerminal:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeatureError(_MESSAGE.format(name="AsyncDockerizedTerminal"))
