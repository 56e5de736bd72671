"""The ``terminate`` tool: the model's way of saying the task is over."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from app.tool.base import BaseTool
from app.tool.declared import ToolArgs

_DESCRIPTION = (
    "End the current task. Call this once the request is fully handled, or when you cannot "
    "make further progress; give the outcome as the status."
)


class TerminateArgs(ToolArgs):
    status: Literal["success", "failure"] = Field(description="Outcome of the task.")


class Terminate(BaseTool):
    name: str = "terminate"
    description: str = _DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = TerminateArgs

    async def execute(self, status: str = "success", **_: Any) -> str:
        return f"The interaction has been completed with status: {status}"
