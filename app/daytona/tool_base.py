"""Upstream compatibility: the base of upstream's Daytona sandbox tools. Building such a tool
raises a clear error: there is no Daytona sandbox for it to act in."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.config import config
from app.daytona import daytona_unsupported
from app.daytona.sandbox import daytona, daytona_config
from app.tool.base import BaseTool

__all__ = [
    "SandboxToolsBase",
    "ThreadMessage",
    "daytona",
    "daytona_config",
    "daytona_settings",
]


if TYPE_CHECKING:
    from app.config import DaytonaSettings

    daytona_settings: DaytonaSettings  # read through __getattr__ below


def __getattr__(name: str) -> Any:
    # Upstream built this at import; here the config is read when the name is first used.
    if name == "daytona_settings":
        return config.section_or_default("daytona_config")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ThreadMessage:
    """A message for a conversation thread (upstream's record shape, kept as plain data)."""

    type: str
    content: dict[str, Any]
    is_llm_message: bool = False
    metadata: dict[str, Any] | None = None
    timestamp: float | None = field(default_factory=lambda: datetime.now().timestamp())

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "content": self.content,
            "is_llm_message": self.is_llm_message,
            "metadata": self.metadata or {},
            "timestamp": self.timestamp,
        }


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
