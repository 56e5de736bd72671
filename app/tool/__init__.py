"""Tools. Names are importable from here as upstream allows (``from app.tool import Bash``);
each is imported on first use, so importing this package stays cheap."""

from __future__ import annotations

from app._lazy import lazy_getattr

__all__ = [
    "AskHuman",
    "BaseTool",
    "Bash",
    "CLIResult",
    "CreateChatCompletion",
    "MCPClientTool",
    "MCPClients",
    "PythonExecute",
    "StrReplaceEditor",
    "Terminate",
    "ToolCollection",
    "ToolFailure",
    "ToolResult",
]

_LOCATIONS = {
    "AskHuman": "app.tool.ask_human",
    "BaseTool": "app.tool.base",
    "Bash": "app.tool.bash",
    "CLIResult": "app.tool.base",
    "CreateChatCompletion": "app.tool.create_chat_completion",
    "MCPClientTool": "app.tool.mcp",
    "MCPClients": "app.tool.mcp",
    "PythonExecute": "app.tool.python_execute",
    "StrReplaceEditor": "app.tool.str_replace_editor",
    "Terminate": "app.tool.terminate",
    "ToolCollection": "app.tool.tool_collection",
    "ToolFailure": "app.tool.base",
    "ToolResult": "app.tool.base",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
