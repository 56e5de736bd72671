"""Upstream compatibility: the base of upstream's Daytona sandbox tools; building one raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.compat.daytona import daytona_unsupported
from app.compat.daytona.sandbox import __getattr__ as __getattr__  # daytona_settings, read on use
from app.compat.daytona.sandbox import daytona, daytona_config
from app.tool.base import BaseTool

if TYPE_CHECKING:
    from app.compat.daytona.sandbox import daytona_settings

__all__ = [
    "SandboxToolsBase",
    "ThreadMessage",
    "daytona",
    "daytona_config",
    "daytona_settings",
]


@dataclass
class ThreadMessage:
    """A message for a conversation thread (upstream's record shape, kept as plain data)."""

    type: str
    content: dict[str, Any]
    is_llm_message: bool = False
    metadata: dict[str, Any] | None = None
    timestamp: float | None = field(default_factory=lambda: datetime.now().timestamp())

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "metadata": self.metadata or {}}


class SandboxToolsBase(BaseTool):
    """A tool acting inside a Daytona sandbox; constructing one raises (see module doc)."""

    name: str = "sandbox_tool"
    description: str = "A tool that works inside a Daytona cloud sandbox (not supported)."
    project_id: str | None = None
    workspace_path: str = "/workspace"

    def __init__(self, **data: Any) -> None:
        raise daytona_unsupported(f"The {type(self).__name__} tool")

    async def execute(self, **kwargs: Any) -> Any:  # pragma: no cover - never constructed
        raise daytona_unsupported(f"The {type(self).__name__} tool")
