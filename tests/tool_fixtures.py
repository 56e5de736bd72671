"""Small tools the agent-loop tests share."""

from __future__ import annotations

from typing import Any

from app.tool.base import BaseTool

__all__ = ["Echo"]


class Echo(BaseTool):
    """Records every call; returns the text it was given."""

    name: str = "echo"
    description: str = "Echo the text back."
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    calls: list[str] = []

    async def execute(self, text: str) -> str:
        self.calls.append(text)
        return f"echo: {text}"
