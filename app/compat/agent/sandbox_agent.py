"""Upstream compatibility: ``SandboxManus``, Manus inside a sandbox (``sandbox_main.py``).

Upstream used a Daytona cloud sandbox; here Manus's tools always run in an isolating
``[sandbox]`` backend (the configured one if it isolates, else ``docker``); no VNC desktop.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from app.agent.manus import Manus
from app.sandbox.factory import current_settings
from app.tool.tool_collection import ToolCollection

__all__ = ["SandboxManus"]


def isolating_backend() -> str:
    """The backend SandboxManus uses: the configured one unless it is ``local``."""
    configured = current_settings().effective_backend
    return configured if configured != "local" else "docker"


class SandboxManus(Manus):
    name: str = "SandboxManus"
    description: str = "A versatile agent whose code runs in an isolated sandbox"
    #: Upstream's links to each Daytona sandbox's VNC desktop and website, by sandbox id;
    #: kept (empty) for code that reads it, since no Daytona sandbox is made here.
    sandbox_link: dict[str, dict[str, str]] = Field(default_factory=dict)

    @staticmethod
    def default_tools(workspace: Path, backend: str | None = None) -> ToolCollection:
        return Manus.default_tools(workspace, backend=backend or isolating_backend())
