"""The chart tools (upstream names and parameters): ``visualization_preparation`` runs Python
that writes CSV and chart JSON; ``data_visualization`` draws them into the workspace's
``visualization/`` through the one confined writer (sandboxed code can fill that folder)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from app.exceptions import ToolError
from app.sandbox.files import FileAccessPolicy, resolve_workspace, write_confined
from app.tool.base import BaseTool, ToolResult
from app.tool.chart.render import ChartFiles, render_chart
from app.tool.chart.spec import load_table, parse_specs
from app.tool.declared import ToolArgs
from app.tool.python_execute import PythonExecute

OUTPUT_TYPES = ("png", "html", "both")
_MAX_JSON_BYTES = 5 * 1024 * 1024


class ChartArgs(ToolArgs):
    """One chart given inline (the same object a chart JSON file lists)."""

    chartTitle: str = Field(description="Title; also names the file.")
    csvFilePath: str | None = Field(None, description="CSV file (relative to workspace).")
    data: list[dict[str, Any]] | None = Field(
        None, description="Rows as objects, instead of a CSV file."
    )
    chartType: Literal["auto", "line", "bar", "scatter", "pie", "area", "histogram"] | None = None
    x: str | None = Field(None, description="Column for the x axis or the labels.")
    y: list[str] | None = Field(
        None, description="Value column(s); default: every other numeric column."
    )


class DataVisualizationArgs(ToolArgs):
    json_path: str | None = Field(None, description="JSON file with a list of chart objects.")
    charts: list[ChartArgs] | None = Field(
        None, description="Chart objects given directly (instead of json_path)."
    )
    output_type: Literal["png", "html", "both"] | None = Field(
        None, description="png (default), html (a self-contained page) or both."
    )
    tool_type: Literal["visualization", "insight"] | None = Field(
        None, description="insight also reports highs, lows and trends."
    )
    language: Literal["en", "zh"] | None = Field(None, description="Language of the insights.")


class VisualizationPrepareArgs(ToolArgs):
    code_type: Literal["visualization", "insight"] | None = Field(
        None, description="What the charts are for; insight charts get observations."
    )
    code: str = Field(description="Python that writes the CSV file(s) and the chart JSON file.")
    timeout: int | None = Field(None, description="Seconds (default 30).")


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
    Args: ClassVar[type[ToolArgs]] = DataVisualizationArgs

    workspace: Path | None = Field(default=None, description="None means config.workspace_root")
    output_dir_name: str = "visualization"
    sandbox: Any = Field(
        default=None,
        description="The app.sandbox.Sandbox the agent's code runs in, if any: what the tool "
        "saves then belongs to the user sandboxed code runs as (its file_owner); without one, "
        "to the workspace's owner.",
    )
    #: Upstream's field (its insights came from a model); accepted so code passing ``llm=``
    #: keeps working, unused because our insights are computed from the data.
    llm: Any = Field(default=None, exclude=True)

    async def execute(
        self,
        *,
        json_path: str | None = None,
        charts: list[ChartArgs] | list[dict[str, Any]] | None = None,
        output_type: str | None = None,
        tool_type: str | None = None,
        language: str | None = None,
        **kwargs: Any,
    ) -> ToolResult:
        output_type = output_type or "png"
        tool_type = tool_type or "visualization"
        language = language or "en"
        if kwargs:  # Python callers; a model's unknown argument is refused before the call
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
            items: Any = charts
            if isinstance(charts, list):  # the model's charts arrive checked, as ChartArgs
                items = [
                    c.model_dump(exclude_none=True) if isinstance(c, ChartArgs) else c
                    for c in charts
                ]
            specs = parse_specs(items, "`charts`")
        formats = ("png", "html") if output_type == "both" else (output_type,)

        lines: list[str] = []
        failures: list[str] = []
        saved = 0
        for spec in specs:
            try:
                table = await asyncio.to_thread(load_table, spec, policy)
                files = await render_chart(
                    spec, table, formats, insights=tool_type == "insight", language=language
                )
                await asyncio.to_thread(self._save, workspace, files)
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

    def _save(self, workspace: Path, files: ChartFiles) -> None:
        """Write each drawn file through the confined writer; ``files.paths`` gets the real
        paths written. A link or a failed write is a ``ToolError`` naming the problem."""
        owner = self.sandbox.file_owner if self.sandbox is not None else _owner_of(workspace)
        for suffix, data in files.outputs.items():
            relative = f"{self.output_dir_name}/{files.stem}.{suffix}"
            try:
                files.paths.append(write_confined(workspace, relative, data, owner=owner))
            except (ToolError, OSError) as e:
                why = e.message if isinstance(e, ToolError) else (e.strerror or str(e))
                done = f" (saved before: {', '.join(map(str, files.paths))})" if files.paths else ""
                raise ToolError(
                    f"chart '{files.title}' was not saved as {workspace / relative}: {why}{done}"
                ) from e


class VisualizationPrepare(PythonExecute):
    """``python_execute`` with upstream's chart-preparation name and ``code_type`` argument."""

    name: str = "visualization_preparation"
    description: str = _PREP_DESCRIPTION
    Args: ClassVar[type[ToolArgs]] = VisualizationPrepareArgs
    default_timeout: float = 30.0

    async def execute(
        self,
        code: str,
        timeout: float | None = None,
        *,
        code_type: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        code_type = code_type or "visualization"
        if code_type not in ("visualization", "insight"):
            raise ToolError("code_type must be 'visualization' or 'insight'")
        return await super().execute(code=code, timeout=timeout, **kwargs)


def _owner_of(workspace: Path) -> tuple[int, int] | None:
    """The workspace's owner when the agent is root and it is someone else's (bubblewrap hands
    it to the user sandboxed code runs as), so that code can keep using what is saved."""
    if os.geteuid() != 0:
        return None
    st = workspace.stat()
    return None if st.st_uid == 0 else (st.st_uid, st.st_gid)


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
