"""``run_task``: the whole Manus agent as one MCP tool, so an IDE or a desktop assistant can
hand it a task and get the answer back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.agent.manus import Manus
from app.tool.base import BaseTool, ToolFailure, ToolResult

_DESCRIPTION = (
    "Give a complete task to the OpenManus agent, which works on it autonomously with its own "
    "tools (Python, shell, file editing, and the browser when installed) in its workspace, "
    "then returns its final answer. Describe the goal and any constraints in plain language."
)


class RunTask(BaseTool):
    """Runs a fresh Manus per call; the agent's own MCP servers are not connected (that could
    loop back to this server)."""

    name: str = "run_task"
    description: str = _DESCRIPTION
    parameters: dict[str, Any] | None = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the agent should do."},
            "max_steps": {
                "type": "integer",
                "minimum": 1,
                "description": "Step budget for this task (default: the agent's, 20).",
            },
        },
        "required": ["task"],
    }
    workspace: Path | None = None

    async def execute(self, task: str = "", max_steps: int | None = None, **_: Any) -> ToolResult:
        if not isinstance(task, str) or not task.strip():
            return ToolFailure(error="`task` must be a non-empty description of the work.")

        kwargs: dict[str, Any] = {"workspace": self.workspace}
        if max_steps is not None:
            if not isinstance(max_steps, int) or max_steps < 1:
                return ToolFailure(error="`max_steps` must be a positive integer.")
            kwargs["max_steps"] = max_steps
        agent = await Manus.create(connect_mcp=False, **kwargs)
        try:
            result = await agent.run(task)
        finally:
            await agent.cleanup()
        answer = result.final_answer or (result.step_results[-1] if result.step_results else "")
        if result.error is not None:
            return ToolFailure(error=f"The agent failed: {result.error}")
        if not result.ok:
            return ToolFailure(
                error=f"The agent stopped after {result.steps} steps without finishing. "
                f"Its last words: {answer}"
            )
        return ToolResult(output=answer or "The agent finished without a written answer.")
