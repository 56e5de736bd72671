"""Upstream's ``DockerSandbox`` (``await DockerSandbox(config).create()``, ``run_command``...):
our Docker backend behind upstream's method names (see :class:`app.sandbox.client.UpstreamSandbox`).
Our own backend class is :class:`app.sandbox.docker.DockerSandbox`."""

from __future__ import annotations

from app.config_sections import SandboxSettings
from app.sandbox.client import UpstreamSandbox

__all__ = ["DockerSandbox"]


class DockerSandbox(UpstreamSandbox):
    """A Docker container sandbox with upstream's interface."""

    def __init__(
        self, config: SandboxSettings | None = None, volume_bindings: dict[str, str] | None = None
    ) -> None:
        super().__init__(config, volume_bindings, backend="docker")
