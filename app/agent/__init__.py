"""Agents. Names are importable from here as upstream allows (``from app.agent import Manus``).

Each name is imported on first use, for a measured cost: importing every agent here made
``import app.agent.toolcall`` load all agents and tools (0.31 s -> 0.54 s of CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.agent.base import BaseAgent
    from app.agent.browser import BrowserAgent
    from app.agent.data_analysis import DataAnalysis
    from app.agent.manus import Manus
    from app.agent.mcp import MCPAgent
    from app.agent.react import ReActAgent
    from app.agent.result import RunResult, StopReason
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
    "StopReason",
    "ToolCallAgent",
]


def __getattr__(name: str) -> object:
    """A name's module, imported on first use (see above); each import written out so
    that import-linter sees it."""
    if name == "BaseAgent":
        from app.agent import base

        return getattr(base, name)
    if name == "DataAnalysis":
        from app.agent import data_analysis

        return getattr(data_analysis, name)
    if name == "BrowserAgent":
        from app.agent import browser

        return getattr(browser, name)
    if name == "MCPAgent":
        from app.agent import mcp

        return getattr(mcp, name)
    if name == "Manus":
        from app.agent import manus

        return getattr(manus, name)
    if name == "ReActAgent":
        from app.agent import react

        return getattr(react, name)
    if name in ("RunResult", "StopReason"):
        from app.agent import result

        return getattr(result, name)
    if name == "SWEAgent":
        from app.agent import swe

        return getattr(swe, name)
    if name == "ToolCallAgent":
        from app.agent import toolcall

        return getattr(toolcall, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
