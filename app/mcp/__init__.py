"""Model Context Protocol: connecting to MCP servers, and serving our own tools over MCP.

The ``mcp`` SDK costs about a second to import, so nothing here imports it until a connection
is made or the server starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.mcp.connection import MCPConnection
    from app.mcp.results import MCPToolResult, tool_name
    from app.mcp.server import MCPServer

__all__ = ["MCPConnection", "MCPServer", "MCPToolResult", "tool_name"]

_LOCATIONS = {
    "MCPConnection": "app.mcp.connection",
    "MCPServer": "app.mcp.server",
    "MCPToolResult": "app.mcp.results",
    "tool_name": "app.mcp.results",
}

__getattr__ = lazy_getattr(__name__, _LOCATIONS)
