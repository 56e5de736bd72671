"""Agents. Names are importable from here as upstream allows (``from app.agent import Manus``);
each is imported on first use, so importing this package stays cheap."""

from __future__ import annotations

from app._lazy import lazy_getattr

__all__ = [
    "BaseAgent",
    "BrowserAgent",
    "DataAnalysis",
    "MCPAgent",
    "Manus",
    "ReActAgent",
    "RunResult",
    "SWEAgent",
    "StopReason",
    "ToolCallAgent",
]

_LOCATIONS = {
    "BaseAgent": "app.agent.base",
    "DataAnalysis": "app.agent.data_analysis",
    "BrowserAgent": "app.agent.browser",
    "MCPAgent": "app.agent.mcp",
    "Manus": "app.agent.manus",
    "ReActAgent": "app.agent.react",
    "RunResult": "app.agent.result",
    "SWEAgent": "app.agent.swe",
    "StopReason": "app.agent.result",
    "ToolCallAgent": "app.agent.toolcall",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
