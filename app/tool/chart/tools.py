"""The chart tools of the data-analysis agent (upstream names and parameters).

* ``visualization_preparation``: runs Python that cleans data into CSV files and writes a JSON
  file listing the charts to draw (upstream's two-step workflow).
* ``data_visualization``: draws the charts listed in that JSON file, or given inline, into
  ``<workspace>/visualization/`` as PNG and/or HTML and returns the saved paths. Upstream
  drove a Node toolchain; we draw with matplotlib.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import Field

from app.exceptions import ToolError
from app.tool.base import BaseTool, ToolResult
from app.tool.chart.render import render_chart
from app.tool.chart.spec import CHART_TYPES, load_table, parse_specs
from app.tool.file_access import FileAccessPolicy, resolve_workspace
from app.tool.python_execute import PythonExecute

__all__ = ["OUTPUT_TYPES", "DataVisualization", "VisualizationPrepare"]

OUTPUT_TYPES = ("png", "html", "both")
_MAX_JSON_BYTES = 5 * 1024 * 1024

_CHART_ITEM = {
    "type": "object",
    "properties": {
        "chartTitle": {"type": "string", "description": "Title; also names the file."},
        "csvFilePath": {"type": "string", "description": "CSV file (relative to workspace)."},
        "data": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Rows as objects, instead of a CSV file.",
        },
        "chartType": {"type": "string", "enum": list(CHART_TYPES)},
        "x": {"type": "string", "description": "Column for the x axis or the labels."},
        "y": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Value column(s); default: every other numeric column.",
        },
    },
    "required": ["chartTitle"],
}

_VIS_DESCRIPTION = (
    "Draw charts from tabular data and save them under the workspace's `visualization` "
    "folder. Give the charts inline in `charts`, or as `json_path`: a JSON file holding a list "
    "of chart objects (as written by visualization_preparation). Each chart has `chartTitle`, "
    "its data as `csvFilePath` or `data` (rows), and optionally `chartType` (auto picks line "
    "for a numeric x, else bar), `x` and `y`. Returns the paths of the saved files; "
    "`tool_type: insight` adds short observations about the data."
)

_PREP_DESCRIPTION = (
    "Run Python code that prepares data for charts: load and clean the data, save each "
    "table as a CSV file, and write a JSON file listing the charts as objects with "
    "`csvFilePath` and `chartTitle` (optionally `chartType`, `x`, `y`). Print the JSON "
    "file's path, then pass it to data_visualization as `json_path`. Runs in the workspace; "
    "only printed output is visible."
)


class DataVisualization(BaseTool):
    """Draws charts with matplotlib; bad specs and data come back as clear errors."""

    name: str = "data_visualization"
    description: str = _VIS_DESCRIPTION
    parameters: dict[str, Any] | None = Field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "json_path": {
                    "type": "string",
                    "description": "JSON file with a list of chart objects.",
                },
                "charts": {
                    "type": "array",
                    "items": _CHART_ITEM,
                    "description": "Chart objects given directly (instead of json_path).",
                },
                "output_type": {
                    "type": "string",
                    "enum": list(OUTPUT_TYPES),
                    "description": "png (default), html (a self-contained page) or both.",
                },
                "tool_type": {
                    "type": "string",
                    "enum": ["visualization", "insight"],
                    "description": "insight also reports highs, lows and trends.",
                },
                "language": {
                    "type": "string",
                    "enum": ["en", "zh"],
                    "description": "Language of the insights.",
                },
            },
        }
    )

    workspace: Path | None = Field(default=None, description="None means config.workspace_root")
    output_dir_name: str = "visualization"
    #: Upstream's field (its insights came from a model); accepted so code passing ``llm=``
    #: keeps working, unused because our insights are computed from the data.
    llm: Any = Field(default=None, exclude=True)

    @property
    def output_dir(self) -> Path:
        return resolve_workspace(self.workspace) / self.output_dir_name

    async def execute(
        self,
        *,
        json_path: str | None = None,
        charts: Any = None,
        output_type: str = "png",
        tool_type: str = "visualization",
        language: str = "en",
        **kwargs: Any,
    ) -> ToolResult:
        if kwargs:
            raise ToolError(f"Unknown parameter(s): {', '.join(sorted(kwargs))}")
        if output_type not in OUTPUT_TYPES:
            raise ToolError(f"output_type must be one of {', '.join(OUTPUT_TYPES)}")
        if tool_type not in ("visualization", "insight"):
            raise ToolError("tool_type must be 'visualization' or 'insight'")
        if language not in ("en", "zh"):
            raise ToolError("language must be 'en' or 'zh'")
        if (json_path is None) == (charts is None):
            raise ToolError("Give exactly one of `json_path` (a JSON file of charts) or `charts`.")
        workspace = resolve_workspace(self.workspace)
        policy = FileAccessPolicy.create(workspace)
        if json_path is not None:
            raw = await asyncio.to_thread(_read_json, policy.resolve(json_path))
            specs = parse_specs(raw, f"'{json_path}'")
        else:
            specs = parse_specs(charts, "`charts`")
        formats = ("png", "html") if output_type == "both" else (output_type,)

        lines: list[str] = []
        failures: list[str] = []
        saved = 0
        for spec in specs:
            try:
                table = await asyncio.to_thread(load_table, spec, policy)
                files = await render_chart(
                    spec,
                    table,
                    workspace / self.output_dir_name,
                    formats,
                    insights=tool_type == "insight",
                    language=language,
                )
            except ToolError as e:
                if len(specs) == 1:
                    raise
                failures.append(f"- {spec.title}: {e.message}")
                continue
            saved += len(files.paths)
            lines.append(f"Chart '{files.title}' ({files.chart_type}):")
            lines += [f"- saved {path}" for path in files.paths]
            lines += [f"  insight: {item}" for item in files.insights]
        if failures:
            lines.append("Charts that could not be drawn:")
            lines += failures
        if not saved:
            raise ToolError("\n".join(lines))
        return ToolResult(output="\n".join(lines))


class VisualizationPrepare(PythonExecute):
    """``python_execute`` with upstream's chart-preparation name and ``code_type`` argument."""

    name: str = "visualization_preparation"
    description: str = _PREP_DESCRIPTION
    parameters: dict[str, Any] | None = Field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "code_type": {
                    "type": "string",
                    "enum": ["visualization", "insight"],
                    "description": "What the charts are for; insight charts get observations.",
                },
                "code": {
                    "type": "string",
                    "description": "Python that writes the CSV file(s) and the chart JSON file.",
                },
                "timeout": {"type": "integer", "description": "Seconds (default 30)."},
            },
            "required": ["code"],
        }
    )
    default_timeout: float = 30.0

    async def execute(
        self,
        code: str | None = None,
        timeout: float | str | None = None,
        *,
        code_type: str = "visualization",
        **kwargs: Any,
    ) -> dict[str, Any]:
        if code_type not in ("visualization", "insight"):
            raise ToolError("code_type must be 'visualization' or 'insight'")
        return await super().execute(code=code, timeout=timeout, **kwargs)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise ToolError(f"JSON file not found: {path}")
    if path.stat().st_size > _MAX_JSON_BYTES:
        raise ToolError(f"JSON file {path} is too large for a chart list")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ToolError(f"Could not read {path}: {e}") from e
    except json.JSONDecodeError as e:
        raise ToolError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
        ) from e
