"""Agents. Names are importable from here as upstream allows (``from app.agent import Manus``);
each is imported on first use, so importing this package stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app._lazy import lazy_getattr

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.agent.browser import BrowserAgent
    from app.agent.data_analysis import DataAnalysis
    from app.agent.manus import Manus
    from app.agent.mcp import MCPAgent
    from app.agent.react import ReActAgent
    from app.agent.result import RunResult, StopReason
    from app.agent.sandbox_agent import SandboxManus
    from app.agent.swe import SWEAgent
    from app.agent.toolcall import ToolCallAgent

__all__ = [
    "BaseAgent",
    "BrowserAgent",
    "DataAnalysis",
    "MCPAgent",
    "Manus",
    "ReActAgent",
    "RunResult",
    "SWEAgent",
    "SandboxManus",
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
    "SandboxManus": "app.agent.sandbox_agent",
    "ToolCallAgent": "app.agent.toolcall",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS)
