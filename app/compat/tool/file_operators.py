"""Upstream compatibility: upstream's file operators as thin adapters onto our sandboxes,
confined to the workspace (``LocalFileOperator``: the ``local`` backend;
``SandboxFileOperator``: the shared ``SANDBOX_CLIENT``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Protocol, runtime_checkable

from app.compat.sandbox.client import SANDBOX_CLIENT
from app.compat.sandbox.core.sandbox import UpstreamSandbox
from app.exceptions import SandboxError, ToolError

__all__ = ["FileOperator", "LocalFileOperator", "PathLike", "SandboxFileOperator"]

PathLike = str | Path


@runtime_checkable
class FileOperator(Protocol):
    """What upstream's editor needed from a file system."""

    async def read_file(self, path: PathLike) -> str: ...
    async def write_file(self, path: PathLike, content: str) -> None: ...
    async def is_directory(self, path: PathLike) -> bool: ...
    async def exists(self, path: PathLike) -> bool: ...
    async def run_command(
        self, cmd: str, timeout: float | None = 120.0
    ) -> tuple[int, str, str]: ...


class _OnSandbox:
    async def _sandbox(self) -> UpstreamSandbox:
        raise NotImplementedError

    async def read_file(self, path: PathLike) -> str:
        try:
            return await (await self._sandbox()).read_file(str(path))
        except (SandboxError, OSError) as e:
            raise ToolError(f"Failed to read {path}: {e}") from None

    async def write_file(self, path: PathLike, content: str) -> None:
        try:
            await (await self._sandbox()).write_file(str(path), content)
        except (SandboxError, OSError) as e:
            raise ToolError(f"Failed to write to {path}: {e}") from None

    async def _test(self, flag: str, path: PathLike) -> bool:
        code, _, _ = await self.run_command(f"test {flag} {shlex.quote(str(path))}")
        return code == 0

    async def is_directory(self, path: PathLike) -> bool:
        return await self._test("-d", path)

    async def exists(self, path: PathLike) -> bool:
        return await self._test("-e", path)

    async def run_command(self, cmd: str, timeout: float | None = 120.0) -> tuple[int, str, str]:
        """(exit code, stdout, stderr); raises TimeoutError like upstream when it runs over."""
        result = await (await self._sandbox()).sandbox.run(cmd, timeout=timeout)
        if result.timed_out:
            raise TimeoutError(f"Command '{cmd}' timed out after {timeout} seconds")
        code = result.exit_code if result.exit_code is not None else -1
        return code, result.stdout, result.stderr


class LocalFileOperator(_OnSandbox):
    """Files of the workspace on this machine (``local`` backend)."""

    encoding: str = "utf-8"

    def __init__(self) -> None:
        self._adapter: UpstreamSandbox | None = None

    async def _sandbox(self) -> UpstreamSandbox:
        if self._adapter is None:
            self._adapter = UpstreamSandbox(backend="local")
        return self._adapter


class SandboxFileOperator(_OnSandbox):
    """Files of the workspace inside the configured sandbox (shared client)."""

    def __init__(self) -> None:
        self.sandbox_client = SANDBOX_CLIENT

    async def _sandbox(self) -> UpstreamSandbox:
        return await self.sandbox_client.ready()
