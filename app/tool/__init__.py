"""Tools. Names are importable from here as upstream allows (``from app.tool import Bash``);
each is imported on first use, so importing this package stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.tool.ask_human import AskHuman
    from app.tool.base import BaseTool, CLIResult, ToolFailure, ToolResult
    from app.tool.bash import Bash
    from app.tool.browser_use_tool import BrowserUseTool
    from app.tool.chart.tools import DataVisualization, VisualizationPrepare
    from app.tool.crawl4ai import Crawl4aiTool
    from app.tool.create_chat_completion import CreateChatCompletion
    from app.tool.function_tool import FunctionTool, tool
    from app.tool.mcp import MCPClients, MCPClientTool
    from app.tool.planning import PlanningTool
    from app.tool.python_execute import PythonExecute
    from app.tool.str_replace_editor import StrReplaceEditor
    from app.tool.terminate import Terminate
    from app.tool.tool_collection import ToolCollection
    from app.tool.web_search import WebSearch

__all__ = [
    "AskHuman",
    "BaseTool",
    "Bash",
    "BrowserUseTool",
    "CLIResult",
    "Crawl4aiTool",
    "CreateChatCompletion",
    "DataVisualization",
    "FunctionTool",
    "MCPClientTool",
    "MCPClients",
    "PlanningTool",
    "PythonExecute",
    "StrReplaceEditor",
    "Terminate",
    "ToolCollection",
    "ToolFailure",
    "ToolResult",
    "VisualizationPrepare",
    "WebSearch",
    "tool",
]

_LOCATIONS = {
    "AskHuman": "app.tool.ask_human",
    "BaseTool": "app.tool.base",
    "Bash": "app.tool.bash",
    "BrowserUseTool": "app.tool.browser_use_tool",
    "CLIResult": "app.tool.base",
    "Crawl4aiTool": "app.tool.crawl4ai",
    "CreateChatCompletion": "app.tool.create_chat_completion",
    "DataVisualization": "app.tool.chart.tools",
    "FunctionTool": "app.tool.function_tool",
    "PlanningTool": "app.tool.planning",
    "MCPClientTool": "app.tool.mcp",
    "MCPClients": "app.tool.mcp",
    "PythonExecute": "app.tool.python_execute",
    "StrReplaceEditor": "app.tool.str_replace_editor",
    "Terminate": "app.tool.terminate",
    "ToolCollection": "app.tool.tool_collection",
    "ToolFailure": "app.tool.base",
    "ToolResult": "app.tool.base",
    "VisualizationPrepare": "app.tool.chart.tools",
    "WebSearch": "app.tool.web_search",
    "tool": "app.tool.function_tool",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
