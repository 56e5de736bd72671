"""One set of tools per MCP client session, so clients never share a shell, undo history or
sandbox. Each HTTP/SSE session's set is built on its first call and cleaned up when the session
ends (DELETE on streamable HTTP, the end of the SSE stream) or after ``idle_timeout`` seconds
unused; stdio has one client, which uses the server's own set.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.logger import logger
from app.tool.base import BaseTool
from app.tool.tool_collection import ToolCollection

#: Set by the SSE endpoint for everything one SSE connection runs (handlers inherit it).
SSE_CONNECTION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "openmanus_mcp_sse_connection", default=None
)
_SESSION_HEADER = "mcp-session-id"


def session_key(ctx: Any) -> str | None:
    """The client session a request belongs to; None for stdio (one client)."""
    sse = SSE_CONNECTION.get()
    if sse is not None:
        return sse
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    sid = headers.get(_SESSION_HEADER) if headers is not None else None
    return f"http:{sid}" if sid else None


@dataclass
class _Entry:
    tools: ToolCollection
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class ToolSessions:
    """The tool sets of the live sessions; ``factory`` None means every session shares
    ``default`` (tools handed to the server ready-made cannot be duplicated)."""

    def __init__(
        self,
        default: ToolCollection,
        factory: Callable[[], list[BaseTool]] | None,
        *,
        idle_timeout: float | None = 3600.0,
    ) -> None:
        self.default = default
        self._factory = factory
        self.idle_timeout = idle_timeout
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, key: str | None) -> _Entry | None:
        if key is None or self._factory is None:
            return None
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(ToolCollection(*self._factory()))
            logger.info(f"MCP session {key[:16]}: new tool set")
        return entry

    async def execute(self, key: str | None, name: str, arguments: dict[str, Any]) -> Any:
        """Run a tool in the session's own tool set."""
        entry = self._entry(key)
        if entry is None:
            return await self.default.execute(name=name, tool_input=arguments)
        entry.busy += 1
        try:
            return await entry.tools.execute(name=name, tool_input=arguments)
        finally:
            entry.busy -= 1
            entry.last_used = time.monotonic()

    async def close(self, key: str) -> bool:
        """End one session: its shells, sandboxes and browser go. False if it had none."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        logger.info(f"MCP session {key[:16]}: ended, cleaning up its tools")
        await entry.tools.cleanup()
        return True

    async def close_idle(self) -> int:
        """Close sessions without a call for ``idle_timeout`` seconds; how many were closed."""
        if self.idle_timeout is None:
            return 0
        cutoff = time.monotonic() - self.idle_timeout
        stale = [k for k, e in self._entries.items() if e.busy == 0 and e.last_used < cutoff]
        for key in stale:
            await self.close(key)
        return len(stale)

    async def reap_forever(self) -> None:
        """Close idle sessions now and then, until cancelled."""
        if self.idle_timeout is None:
            await asyncio.Event().wait()
        assert self.idle_timeout is not None
        while True:
            await asyncio.sleep(max(1.0, min(60.0, self.idle_timeout / 4)))
            await self.close_idle()

    async def close_all(self) -> None:
        for key in list(self._entries):
            with contextlib.suppress(Exception):
                await self.close(key)
