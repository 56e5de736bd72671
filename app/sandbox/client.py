"""Upstream compatibility: upstream's sandbox client API (``SANDBOX_CLIENT.run_command(...)``)
over our sandboxes. ``create()`` starts a Docker container as upstream did, unless
``config.backend`` names another; without ``create()`` the configured ``[sandbox]`` backend
runs on the configured workspace."""

from __future__ import annotations

import asyncio
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from app.config import SandboxSettings
from app.exceptions import SandboxError, SandboxTimeoutError, UnsupportedFeatureError
from app.sandbox.factory import create_sandbox, current_settings
from app.sandbox.files import default_workspace, write_confined

if TYPE_CHECKING:
    from app.sandbox.base import Sandbox

__all__ = [
    "SANDBOX_CLIENT",
    "BaseSandboxClient",
    "LocalSandboxClient",
    "SandboxFileOperations",
    "UpstreamSandbox",
    "copy_out",
    "create_sandbox_client",
    "open_sandbox",
]


class SandboxFileOperations(Protocol):
    """What upstream code expects of a sandbox's files."""

    async def copy_from(self, container_path: str, local_path: str) -> None: ...
    async def copy_to(self, local_path: str, container_path: str) -> None: ...
    async def read_file(self, path: str) -> str: ...
    async def write_file(self, path: str, content: str) -> None: ...


def _workspace_from_bindings(
    settings: SandboxSettings, volume_bindings: dict[str, str] | None
) -> str | None:
    """Upstream mounted ``{host_dir: container_dir}``; ours mounts one workspace at work_dir."""
    if not volume_bindings:
        return None
    if len(volume_bindings) == 1:
        host, inside = next(iter(volume_bindings.items()))
        if inside.rstrip("/") == settings.work_dir.rstrip("/"):
            return host
    raise UnsupportedFeatureError(
        f"volume_bindings {volume_bindings!r}: this sandbox mounts one workspace directory at "
        f"[sandbox] work_dir ({settings.work_dir}); pass {{host_dir: {settings.work_dir!r}}} "
        "or set the workspace instead"
    )


class UpstreamSandbox:
    """One of our sandboxes behind upstream's method names (``create``, ``run_command``,
    text ``read_file``/``write_file``, ``copy_from``/``copy_to``, ``cleanup``)."""

    def __init__(
        self,
        config: SandboxSettings | None = None,
        volume_bindings: dict[str, str] | None = None,
        *,
        backend: str | None = None,
    ) -> None:
        self.config = config if config is not None else current_settings()
        workspace = _workspace_from_bindings(self.config, volume_bindings)
        self.sandbox: Sandbox = create_sandbox(self.config, workspace, backend=backend)

    async def create(self) -> Self:
        await self.sandbox.start()
        return self

    async def run_command(self, cmd: str, timeout: int | None = None) -> str:
        """Run ``cmd`` with bash; its output (stdout then stderr). Raises on timeout."""
        result = await self.sandbox.run(cmd, timeout=timeout)
        if result.timed_out:
            limit = timeout or self.sandbox.limits.timeout
            raise SandboxTimeoutError(f"Command timed out after {limit} seconds: {cmd}")
        return result.stdout + result.stderr

    async def read_file(self, path: str) -> str:
        try:
            data = await self.sandbox.read_file(path)
        except OSError as e:
            raise SandboxError(f"Failed to read {path}: {e}") from e
        return data.decode("utf-8", errors="replace")

    async def write_file(self, path: str, content: str) -> None:
        try:
            await self.sandbox.write_file(path, content.encode("utf-8"))
        except OSError as e:
            raise SandboxError(f"Failed to write {path}: {e}") from e

    async def copy_from(self, src_path: str, dst_path: str) -> None:
        """A workspace file of the sandbox copied to ``dst_path`` on the host (:func:`copy_out`)."""
        data = await self.sandbox.read_file(src_path)
        await asyncio.to_thread(
            copy_out, data, Path(dst_path), self.sandbox.workspace, self.sandbox.file_owner
        )

    async def copy_to(self, src_path: str, dst_path: str) -> None:
        """A host file copied into the sandbox's workspace as ``dst_path``."""
        data = await asyncio.to_thread(Path(src_path).read_bytes)
        await self.sandbox.write_file(dst_path, data)

    async def cleanup(self) -> None:
        await self.sandbox.cleanup()

    async def __aenter__(self) -> Self:
        return await self.create()

    async def __aexit__(self, *exc: Any) -> None:
        await self.cleanup()


def copy_out(data: bytes, target: Path, workspace: Path, owner: tuple[int, int] | None) -> None:
    """Write a file copied out of a sandbox: confined beneath the workspace when it lands
    there (sandboxed code may have planted links), else in the operator's own directory."""
    target = Path(os.path.abspath(target))
    for root in (Path(os.path.abspath(workspace)), Path(os.path.realpath(workspace))):
        if target != root and target.is_relative_to(root):
            write_confined(root, target.relative_to(root).parts, data, owner=owner)
            return
    target.parent.mkdir(parents=True, exist_ok=True)  # the operator's own directory
    write_confined(target.parent, (target.name,), data)


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
        from app.sandbox.core.sandbox import DockerSandbox  # imports this module

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
