"""Upstream compatibility: upstream's sandbox client API (``SANDBOX_CLIENT.run_command(...)``)
over our sandboxes. ``create()`` starts a Docker container as upstream did, unless
``config.backend`` names another; without ``create()`` the configured ``[sandbox]`` backend
runs on the configured workspace."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol

from app.compat.sandbox.core.sandbox import DockerSandbox, UpstreamSandbox
from app.config import SandboxSettings
from app.sandbox.factory import current_settings
from app.sandbox.files import default_workspace

if TYPE_CHECKING:
    pass

__all__ = [
    "SANDBOX_CLIENT",
    "BaseSandboxClient",
    "LocalSandboxClient",
    "SandboxFileOperations",
    "create_sandbox_client",
    "open_sandbox",
]


class SandboxFileOperations(Protocol):
    """What upstream code expects of a sandbox's files."""

    async def copy_from(self, container_path: str, local_path: str) -> None: ...
    async def copy_to(self, local_path: str, container_path: str) -> None: ...
    async def read_file(self, path: str) -> str: ...
    async def write_file(self, path: str, content: str) -> None: ...


async def open_sandbox(
    config: SandboxSettings | None,
    volume_bindings: dict[str, str] | None,
    backend: str | None = None,
    configured_workspace: bool = False,
) -> UpstreamSandbox:
    """A started sandbox of ``backend`` (default: ``config.backend``, else Docker, as upstream)
    with upstream's methods. Docker's work directory is a private one unless bound (or
    ``configured_workspace``: the configured workspace)."""
    config = config if config is not None else SandboxSettings()
    backend = backend or config.backend or "docker"
    if backend == "docker":
        workspace = default_workspace() if configured_workspace else None
        return await DockerSandbox(config, volume_bindings, workspace=workspace).create()
    return await UpstreamSandbox(config, volume_bindings, backend=backend).create()


class BaseSandboxClient(ABC):
    """Upstream's client interface."""

    @abstractmethod
    async def create(
        self, config: SandboxSettings | None = None, volume_bindings: dict[str, str] | None = None
    ) -> None: ...

    @abstractmethod
    async def run_command(self, command: str, timeout: int | None = None) -> str: ...

    @abstractmethod
    async def copy_from(self, container_path: str, local_path: str) -> None: ...

    @abstractmethod
    async def copy_to(self, local_path: str, container_path: str) -> None: ...

    @abstractmethod
    async def read_file(self, path: str) -> str: ...

    @abstractmethod
    async def write_file(self, path: str, content: str) -> None: ...

    @abstractmethod
    async def cleanup(self) -> None: ...


class LocalSandboxClient(BaseSandboxClient):
    """One sandbox, created by :meth:`create` (or on first use with the config's settings)."""

    def __init__(self) -> None:
        self.sandbox: UpstreamSandbox | None = None

    async def create(
        self, config: SandboxSettings | None = None, volume_bindings: dict[str, str] | None = None
    ) -> None:
        """Start a sandbox: a Docker container unless ``config.backend`` says otherwise."""
        await self.cleanup()
        self.sandbox = await open_sandbox(config, volume_bindings)

    async def ready(self) -> UpstreamSandbox:
        """The sandbox; without :meth:`create`, the configured backend and workspace."""
        if self.sandbox is None:
            settings = current_settings()
            self.sandbox = await open_sandbox(settings, None, settings.effective_backend, True)
        return self.sandbox

    async def run_command(self, command: str, timeout: int | None = None) -> str:
        return await (await self.ready()).run_command(command, timeout)

    async def copy_from(self, container_path: str, local_path: str) -> None:
        await (await self.ready()).copy_from(container_path, local_path)

    async def copy_to(self, local_path: str, container_path: str) -> None:
        await (await self.ready()).copy_to(local_path, container_path)

    async def read_file(self, path: str) -> str:
        return await (await self.ready()).read_file(path)

    async def write_file(self, path: str, content: str) -> None:
        await (await self.ready()).write_file(path, content)

    async def cleanup(self) -> None:
        if self.sandbox is not None:
            await self.sandbox.cleanup()
            self.sandbox = None


def create_sandbox_client() -> LocalSandboxClient:
    return LocalSandboxClient()


#: Upstream's shared client; nothing is started until it is first used.
SANDBOX_CLIENT = create_sandbox_client()
