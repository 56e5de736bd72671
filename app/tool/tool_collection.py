"""A named set of tools: what the agent offers the model and dispatches calls to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.exceptions import ToolArgumentsError, ToolError
from app.logger import logger
from app.tool.base import BaseTool, ToolFailure, ToolResult


class ToolCollection:
    """Tools by name. Every failure of a call comes back as a ``ToolFailure`` for the model."""

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

    async def execute(self, *, name: str, tool_input: dict[str, Any] | None = None) -> Any:
        """Run one tool; unknown names, arguments that do not fit its schema (checked before it
        runs, see ``app.tool.validation``) and exceptions become failures."""
        tool = self.tool_map.get(name)
        if tool is None:
            known = ", ".join(self.tool_map) or "none"
            return ToolFailure(error=f"Tool '{name}' is not available. Available tools: {known}.")
        try:
            args = tool.validate_arguments(tool_input or {})
        except ToolArgumentsError as e:  # the model can fix it: every problem at once
            return ToolFailure(error=e.message)
        try:
            return await tool(**args)
        except ToolError as e:
            return ToolFailure(error=e.message)
        except Exception as e:  # a tool bug (a TypeError included) must not end the agent's loop
            logger.opt(exception=e).warning(f"Tool '{name}' raised {type(e).__name__}")
            return ToolFailure(error=f"Tool '{name}' failed: {type(e).__name__}: {e}")

    async def execute_all(self) -> list[ToolResult]:
        """Run every tool without arguments, one after another (upstream's helper)."""
        results: list[ToolResult] = []
        for tool in self.tools:
            try:
                result = await tool()
            except ToolError as e:
                result = ToolFailure(error=e.message)
            except Exception as e:
                result = ToolFailure(error=f"Tool '{tool.name}' failed: {e}")
            results.append(result)
        return results

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
