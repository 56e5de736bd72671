"""``SWEAgent``: a programmer working through a shell and a file editor."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from app.agent.toolcall import ToolCallAgent
from app.agent.workspace import attach_workspace
from app.prompt.swe import NEXT_STEP_PROMPT, SYSTEM_PROMPT
from app.sandbox.factory import create_sandbox
from app.tool.bash import Bash
from app.tool.str_replace_editor import StrReplaceEditor
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection


class SWEAgent(ToolCallAgent):
    name: str = "swe"
    description: str = "an autonomous AI programmer that interacts directly with the computer"

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    max_steps: int = 20
    workspace: Path | None = Field(default=None, description="Directory the tools work in")
    #: Built for the workspace by the validator below, unless passed in.
    available_tools: ToolCollection = Field(default_factory=ToolCollection)
    special_tool_names: list[str] = Field(default_factory=lambda: [Terminate().name])

    @model_validator(mode="after")
    def _setup_workspace_and_tools(self) -> SWEAgent:
        attach_workspace(self, self.default_tools)
        return self

    @staticmethod
    def default_tools(workspace: Path) -> ToolCollection:
        sandbox = create_sandbox(workspace=workspace)  # [sandbox] backend; started lazily
        return ToolCollection(
            Bash(workspace=workspace, sandbox=sandbox),
            StrReplaceEditor(workspace=workspace, sandbox=sandbox),
            Terminate(),
        )
