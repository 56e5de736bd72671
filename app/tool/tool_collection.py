"""A named set of tools: what the agent offers the model and dispatches calls to."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from app.exceptions import ToolArgumentsError, ToolError
from app.logger import logger
from app.tool.base import BaseTool, ToolFailure, ToolResult, as_tool_result


class ToolCollection:
    """Tools by name; every call comes back as a ``ToolResult`` (see :func:`call_tool`)."""

    def __init__(self, *tools: BaseTool) -> None:
        self.tools: tuple[BaseTool, ...] = ()
        self.tool_map: dict[str, BaseTool] = {}
        self.add_tools(*tools)

    def __iter__(self) -> Iterator[BaseTool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tool_map

    def to_params(self) -> list[dict[str, Any]]:
        return [tool.to_param() for tool in self.tools]

    async def execute(self, *, name: str, tool_input: dict[str, Any] | None = None) -> ToolResult:
        """Run one tool by name (see :func:`call_tool`); an unknown name is a failure too."""
        tool = self.tool_map.get(name)
        if tool is None:
            return self.unknown_tool(name)
        return await call_tool(tool, tool_input)

    def unknown_tool(self, name: str) -> ToolFailure:
        """The failure for a call of a tool this collection does not hold."""
        known = ", ".join(self.tool_map) or "none"
        nameless = "" if name.strip() else " (the call names no tool)"
        return ToolFailure(error=f"Unknown tool '{name}'{nameless}. Available tools: {known}.")

    async def execute_all(self) -> list[ToolResult]:
        """Run every tool without arguments, one after another (upstream's helper)."""
        return [await call_tool(tool, None, check=False) for tool in self.tools]

    def get_tool(self, name: str) -> BaseTool | None:
        return self.tool_map.get(name)

    def add_tool(self, tool: BaseTool) -> ToolCollection:
        """Add a tool; a name already present is kept and the newcomer skipped, with a warning."""
        if tool.name in self.tool_map:
            logger.warning(f"Tool '{tool.name}' is already in the collection; skipping the new one")
            return self
        self.tools = (*self.tools, tool)
        self.tool_map[tool.name] = tool
        return self

    def add_tools(self, *tools: BaseTool) -> ToolCollection:
        for tool in tools:
            self.add_tool(tool)
        return self

    def remove_tool(self, name: str) -> BaseTool | None:
        tool = self.tool_map.pop(name, None)
        if tool is not None:
            self.tools = tuple(t for t in self.tools if t.name != name)
        return tool

    async def cleanup(self) -> None:
        """Let every tool release what it holds; one failing cleanup does not stop the rest."""
        for tool in self.tools:
            try:
                await tool.cleanup()
            except Exception as e:
                logger.warning(f"Cleanup of tool '{tool.name}' failed: {e}")


async def call_tool(
    tool: BaseTool, arguments: Mapping[str, Any] | None, *, check: bool = True
) -> ToolResult:
    """Run ``tool`` on the model's ``arguments``: the one edge where every way a tool fails
    becomes a ``ToolResult`` flagged ``is_error`` (a raised ``ToolError``, upstream's
    ``ToolFailure``, ``ToolResult(error=...)`` or ``{"success": False}``, arguments that do not
    fit its schema, checked first unless ``check`` is False, and any other exception, a bug in
    the tool that must not end the agent's loop)."""
    try:
        args = tool.validate_arguments(arguments or {}) if check else {}
    except ToolArgumentsError as e:  # the model can fix it: every problem at once
        return ToolFailure(error=e.message)
    try:
        return as_tool_result(await tool(**args))
    except ToolError as e:
        return ToolFailure(error=e.message)
    except Exception as e:
        logger.opt(exception=e).warning(f"Tool '{tool.name}' raised {type(e).__name__}")
        return ToolFailure(error=f"Tool '{tool.name}' failed: {type(e).__name__}: {e}")
