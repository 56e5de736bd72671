"""Agents that work in a directory: the workspace is resolved and put into their prompt when
the agent is created, not at import, so ``--workspace`` and config changes take effect."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.sandbox.files import resolve_workspace


def attach_workspace(agent: Any, build_tools: Callable[[Path], Any]) -> None:
    """Resolve ``agent.workspace``, fill ``{directory}`` in its system prompt, and give it
    ``build_tools(workspace)`` unless tools were passed in."""
    agent.workspace = resolve_workspace(agent.workspace)
    if agent.system_prompt and "{directory}" in agent.system_prompt:
        agent.system_prompt = agent.system_prompt.format(directory=agent.workspace)
    if "available_tools" not in agent.model_fields_set:
        agent.available_tools = build_tools(agent.workspace)
