"""The ``terminate`` tool: the model's way of saying the task is over."""

from __future__ import annotations

from typing import Any

from app.tool.base import BaseTool

__all__ = ["Terminate"]

_DESCRIPTION = (
    "End the current task. Call this once the request is fully handled, or when you cannot "
    "make further progress; give the outcome as the status."
)


class Terminate(BaseTool):
    name: str = "terminate"
    description: str = _DESCRIPTION
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {
            "status": {
                "type": "string",
                "description": "Outcome of the task.",
                "enum": ["success", "failure"],
            }
        },
        "required": ["status"],
    }

    async def execute(self, status: str = "success", **_: Any) -> str:
        return f"The interaction has been completed with status: {status}"
