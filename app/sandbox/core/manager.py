"""Upstream's ``SandboxManager``: several sandboxes by id, at most ``max_sandboxes`` at once,
each one of upstream's :class:`~app.sandbox.core.sandbox.DockerSandbox` (our Docker backend).
Sandboxes idle for ``idle_timeout`` seconds are removed when another is created or when
:meth:`cleanup_idle` runs (no background task)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.config_sections import SandboxSettings
from app.exceptions import SandboxError, SandboxResourceError
from app.sandbox.core.sandbox import DockerSandbox

__all__ = ["SandboxManager"]


class SandboxManager:
    def __init__(
        self,
        max_sandboxes: int = 100,
        idle_timeout: int = 3600,
        cleanup_interval: int = 300,
    ) -> None:
        self.max_sandboxes = max_sandboxes
        self.idle_timeout = idle_timeout
        self.cleanup_interval = cleanup_interval
        self._sandboxes: dict[str, DockerSandbox] = {}
        self._last_used: dict[str, float] = {}
        self._lock = asyncio.Lock()

    async def create_sandbox(
        self,
        config: SandboxSettings | None = None,
        volume_bindings: dict[str, str] | None = None,
    ) -> str:
        """Start a sandbox; its id. Raises SandboxResourceError when the pool is full."""
        await self.cleanup_idle()
        async with self._lock:
            if len(self._sandboxes) >= self.max_sandboxes:
                raise SandboxResourceError(
                    f"Maximum number of sandboxes ({self.max_sandboxes}) reached"
                )
            sandbox = await DockerSandbox(config, volume_bindings).create()
            sandbox_id = str(uuid.uuid4())
            self._sandboxes[sandbox_id] = sandbox
            self._last_used[sandbox_id] = time.monotonic()
            return sandbox_id

    async def get_sandbox(self, sandbox_id: str) -> DockerSandbox:
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None:
            raise KeyError(f"Sandbox {sandbox_id} not found")
        self._last_used[sandbox_id] = time.monotonic()
        return sandbox

    @asynccontextmanager
    async def sandbox_operation(self, sandbox_id: str) -> AsyncIterator[DockerSandbox]:
        yield await self.get_sandbox(sandbox_id)
        self._last_used[sandbox_id] = time.monotonic()

    async def delete_sandbox(self, sandbox_id: str) -> None:
        async with self._lock:
            sandbox = self._sandboxes.pop(sandbox_id, None)
            self._last_used.pop(sandbox_id, None)
        if sandbox is not None:
            await sandbox.cleanup()

    async def cleanup_idle(self) -> None:
        """Remove sandboxes unused for ``idle_timeout`` seconds."""
        now = time.monotonic()
        idle = [i for i, t in self._last_used.items() if now - t > self.idle_timeout]
        for sandbox_id in idle:
            await self.delete_sandbox(sandbox_id)

    async def cleanup(self) -> None:
        """Remove every sandbox; reports (after trying all) the ones that failed."""
        failures: list[str] = []
        for sandbox_id in list(self._sandboxes):
            try:
                await self.delete_sandbox(sandbox_id)
            except Exception as e:  # keep cleaning the others, then report
                failures.append(f"{sandbox_id}: {e}")
        if failures:
            raise SandboxError("Some sandboxes could not be cleaned up: " + "; ".join(failures))

    async def __aenter__(self) -> SandboxManager:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.cleanup()

    def get_stats(self) -> dict[str, Any]:
        return {
            "total_sandboxes": len(self._sandboxes),
            "max_sandboxes": self.max_sandboxes,
            "idle_timeout": self.idle_timeout,
            "cleanup_interval": self.cleanup_interval,
        }
