"""``DataAnalysis``: Python for the numbers, matplotlib charts for the pictures."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from app.agent.toolcall import ToolCallAgent
from app.agent.workspace import attach_workspace
from app.prompt.visualization import NEXT_STEP_PROMPT, SYSTEM_PROMPT
from app.tool.chart.tools import DataVisualization, VisualizationPrepare
from app.tool.python_execute import PythonExecute
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection


class DataAnalysis(ToolCallAgent):
    """Analyses data and saves charts under ``<workspace>/visualization/`` (upstream name)."""

    name: str = "Data_Analysis"
    description: str = (
        "A data analyst that computes statistics with Python and turns data into charts "
        "(PNG, or HTML pages) saved in the workspace"
    )

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    max_observe: int = 15000
    max_steps: int = 20

    workspace: Path | None = Field(default=None, description="Directory the tools work in")
    #: Built for the workspace by the validator below, unless passed in.
    available_tools: ToolCollection = Field(default_factory=ToolCollection)
    special_tool_names: list[str] = Field(default_factory=lambda: [Terminate().name])

    @model_validator(mode="after")
    def _setup_workspace_and_tools(self) -> DataAnalysis:
        attach_workspace(self, self.default_tools)
        return self

    @staticmethod
    def default_tools(workspace: Path) -> ToolCollection:
        return ToolCollection(
            PythonExecute(workspace=workspace, default_timeout=30.0),
            VisualizationPrepare(workspace=workspace),
            DataVisualization(workspace=workspace),
            Terminate(),
        )
