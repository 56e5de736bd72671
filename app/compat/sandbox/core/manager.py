"""Upstream compatibility: ``SandboxManager``, sandboxes by id, at most ``max_sandboxes``,
removed after ``idle_timeout`` seconds unused (never while inside ``sandbox_operation``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.compat.sandbox.client import open_sandbox
from app.compat.sandbox.core.exceptions import SandboxLimitError
from app.compat.sandbox.core.sandbox import UpstreamSandbox
from app.config import SandboxSettings
from app.logger import logger
from app.sandbox.docker import docker_client

__all__ = ["SandboxManager"]


class SandboxManager:
    def __init__(
        self,
        max_sandboxes: int = 100,
        idle_timeout: float = 3600,
        cleanup_interval: float = 300,
    ) -> None:
        self.max_sandboxes = max_sandboxes
        self.idle_timeout = idle_timeout
        self.cleanup_interval = cleanup_interval
        self._sandboxes: dict[str, UpstreamSandbox] = {}
        self._last_used: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._global_lock = asyncio.Lock()
        self._active_operations: set[str] = set()
        self._cleanup_task: asyncio.Task[None] | None = None
        self._is_shutting_down = False
        with contextlib.suppress(RuntimeError):  # no running loop: started with a sandbox
            asyncio.get_running_loop()
            self.start_cleanup_task()

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def start_cleanup_task(self) -> None:
        """Start the idle-sandbox sweeper (once; needs a running event loop)."""
        if self._cleanup_task is not None and not self._cleanup_task.done():
            return

        async def sweep() -> None:
            while not self._is_shutting_down:
                try:
                    await self._cleanup_idle_sandboxes()
                except Exception as e:  # keep sweeping; the next round may succeed
                    logger.error(f"Error in sandbox cleanup loop: {e}")
                await asyncio.sleep(self.cleanup_interval)

        self._is_shutting_down = False
        self._cleanup_task = asyncio.get_running_loop().create_task(sweep())

    async def ensure_image(self, image: str) -> bool:
        """Whether ``image`` is on the engine (pulled if missing and a registry answers)."""

        def work() -> None:
            from docker.errors import ImageNotFound

            client = docker_client()
            try:
                client.images.get(image)
            except ImageNotFound:
                logger.info(f"Pulling image {image}...")
                client.images.pull(image)
            finally:
                client.close()

        try:
            await asyncio.to_thread(work)
            return True
        except Exception as e:  # no engine, no registry, no such image
            logger.error(f"Failed to pull image {image}: {e}")
            return False

    async def create_sandbox(
        self,
        config: SandboxSettings | None = None,
        volume_bindings: dict[str, str] | None = None,
    ) -> str:
        """Start a sandbox; its id. SandboxLimitError (a RuntimeError) when the pool is full."""
        self.start_cleanup_task()
        async with self._global_lock:
            if len(self._sandboxes) >= self.max_sandboxes:
                raise SandboxLimitError(
                    f"Maximum number of sandboxes ({self.max_sandboxes}) reached"
                )
            sandbox = await open_sandbox(config, volume_bindings)
            sandbox_id = str(uuid.uuid4())
            self._sandboxes[sandbox_id] = sandbox
            self._last_used[sandbox_id] = self._now()
            self._locks[sandbox_id] = asyncio.Lock()
            logger.info(f"Created sandbox {sandbox_id}")
            return sandbox_id

    @asynccontextmanager
    async def sandbox_operation(self, sandbox_id: str) -> AsyncIterator[UpstreamSandbox]:
        """The sandbox, marked in use (not idle) until the block ends; KeyError if unknown."""
        lock = self._locks.setdefault(sandbox_id, asyncio.Lock())
        async with lock:
            if sandbox_id not in self._sandboxes:
                self._locks.pop(sandbox_id, None)
                raise KeyError(f"Sandbox {sandbox_id} not found")
            self._active_operations.add(sandbox_id)
            try:
                self._last_used[sandbox_id] = self._now()
                yield self._sandboxes[sandbox_id]
            finally:
                self._active_operations.discard(sandbox_id)
                if sandbox_id in self._sandboxes:
                    self._last_used[sandbox_id] = self._now()

    async def get_sandbox(self, sandbox_id: str) -> UpstreamSandbox:
        """The sandbox with this id (its idle clock restarts); KeyError if unknown."""
        async with self.sandbox_operation(sandbox_id) as sandbox:
            return sandbox

    async def _cleanup_idle_sandboxes(self) -> None:
        """Remove sandboxes unused for more than ``idle_timeout`` seconds."""
        now = self._now()
        async with self._global_lock:
            idle = [
                sandbox_id
                for sandbox_id, last in self._last_used.items()
                if sandbox_id not in self._active_operations and now - last > self.idle_timeout
            ]
        for sandbox_id in idle:
            await self.delete_sandbox(sandbox_id)

    async def delete_sandbox(self, sandbox_id: str) -> None:
        """Remove one sandbox (unknown ids are ignored); failures are logged, as upstream."""
        async with self._global_lock:
            sandbox = self._sandboxes.pop(sandbox_id, None)
            self._last_used.pop(sandbox_id, None)
            self._locks.pop(sandbox_id, None)
        if sandbox is None:
            return
        try:
            await sandbox.cleanup()
            logger.info(f"Deleted sandbox {sandbox_id}")
        except Exception as e:
            logger.error(f"Error during cleanup of sandbox {sandbox_id}: {e}")

    async def cleanup(self) -> None:
        """Stop the sweeper and remove every sandbox (concurrently)."""
        self._is_shutting_down = True
        task, self._cleanup_task = self._cleanup_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        ids = list(self._sandboxes)
        if ids:
            await asyncio.gather(*(self.delete_sandbox(i) for i in ids))
        self._active_operations.clear()

    async def __aenter__(self) -> SandboxManager:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.cleanup()

    def get_stats(self) -> dict[str, Any]:
        return {
            "total_sandboxes": len(self._sandboxes),
            "active_operations": len(self._active_operations),
            "max_sandboxes": self.max_sandboxes,
            "idle_timeout": self.idle_timeout,
            "cleanup_interval": self.cleanup_interval,
            "is_shutting_down": self._is_shutting_down,
        }
