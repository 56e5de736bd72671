"""Upstream compatibility: ``SandboxManus``, Manus inside a sandbox (``sandbox_main.py``).

Upstream ran it in a Daytona cloud sandbox. Here it is :class:`~app.agent.manus.Manus` whose
code-running and file tools always work in an isolating ``[sandbox]`` backend: the configured
one when it isolates (``docker`` or ``bubblewrap``), else ``docker`` (upstream's own local
sandbox). Daytona's VNC desktop and sandboxed browser are not provided (see ``app.daytona``).
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
