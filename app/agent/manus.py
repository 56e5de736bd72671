"""``Manus``: the general-purpose agent behind ``main.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from app.agent.browser import BrowserContextHelper
from app.agent.mcp import MCPHostAgent
from app.agent.workspace import attach_workspace
from app.config import config, find_config_path
from app.install_hint import pip_install
from app.logger import logger
from app.prompt.browser import NEXT_STEP_PROMPT as BROWSER_NEXT_STEP_PROMPT
from app.prompt.manus import NEXT_STEP_PROMPT, SYSTEM_PROMPT
from app.sandbox.factory import create_sandbox
from app.schema import Message
from app.tool.ask_human import AskHuman
from app.tool.base import BaseTool
from app.tool.bash import Bash
from app.tool.python_execute import PythonExecute
from app.tool.str_replace_editor import StrReplaceEditor
from app.tool.terminate import Terminate
from app.tool.tool_collection import ToolCollection

_browser_notice_shown = False


def browser_tool_or_notice() -> BaseTool | None:
    """The browser tool when the ``browser`` extra is installed; otherwise one notice."""
    global _browser_notice_shown
    if importlib.util.find_spec("browser_use") is not None:
        # Measured: 40 ms of ``import app.agent.manus`` (budget 0.5 s); loaded when first used.
        from app.tool.browser_use_tool import BrowserUseTool

        return BrowserUseTool()
    if not _browser_notice_shown:
        _browser_notice_shown = True
        logger.info(
            "browser_use is not available (install the extra: {}; Chromium: "
            "scripts/setup-chromium.sh)",
            pip_install("browser"),
        )
    return None


class Manus(MCPHostAgent):
    """Python, shell, file editing, asking the human, the browser when installed, and the
    tools of every MCP server in ``mcp.json`` (see ``create``)."""

    name: str = "Manus"
    description: str = "A versatile agent that can solve various tasks using multiple tools"

    system_prompt: str = SYSTEM_PROMPT
    next_step_prompt: str = NEXT_STEP_PROMPT

    max_observe: int = 10000
    max_steps: int = 20

    workspace: Path | None = Field(default=None, description="Directory the tools work in")
    #: Built for the workspace by the validator below, unless passed in.
    available_tools: ToolCollection = Field(default_factory=ToolCollection)
    special_tool_names: list[str] = Field(default_factory=lambda: [Terminate().name])

    _browser_helper: BrowserContextHelper | None = PrivateAttr(default=None)
    #: Whether mcp.json's servers were connected (or deliberately skipped): ``create`` does it,
    #: else the first ``think`` (upstream's rule), so ``Manus()`` gets them too.
    _mcp_initialized: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _setup_workspace_and_tools(self) -> Manus:
        attach_workspace(self, self.default_tools)
        self._browser_helper = BrowserContextHelper(self)
        return self

    @property
    def browser_context_helper(self) -> BrowserContextHelper:
        assert self._browser_helper is not None
        return self._browser_helper

    def _browser_in_use(self) -> bool:
        """Whether one of the last three messages called the browser (upstream's rule)."""
        return any(
            call.function.name == "browser_use"
            for message in self.memory.messages[-3:]
            for call in (message.tool_calls or [])
        )

    async def think(self) -> bool:
        """While the browser is in use, the step prompt carries its state (and screenshot)."""
        if not self._mcp_initialized:
            self._mcp_initialized = True
            await self.initialize_mcp_servers()
        if not self._browser_in_use():
            return await super().think()
        original = self.next_step_prompt
        self.next_step_prompt = await self.browser_context_helper.format_next_step_prompt(
            BROWSER_NEXT_STEP_PROMPT
        )
        try:
            return await super().think()
        finally:
            self.next_step_prompt = original

    def _request_messages(self) -> list[Message]:
        return self.browser_context_helper.attach_screenshot(super()._request_messages())

    @staticmethod
    def default_tools(workspace: Path, backend: str | None = None) -> ToolCollection:
        # [sandbox] backend (or ``backend``); started lazily
        sandbox = create_sandbox(workspace=workspace, backend=backend)
        tools: list[BaseTool] = [
            PythonExecute(workspace=workspace, sandbox=sandbox),
            Bash(workspace=workspace, sandbox=sandbox),
            StrReplaceEditor(workspace=workspace, sandbox=sandbox),
            AskHuman(),
        ]
        browser = browser_tool_or_notice()
        if browser is not None:
            tools.append(browser)
        tools.append(Terminate())
        return ToolCollection(*tools)

    @classmethod
    async def create(cls, *, connect_mcp: bool = True, **kwargs: Any) -> Manus:
        """A Manus connected to every server of ``mcp.json`` (upstream's factory; ``Manus()``
        connects on its first step). Failed servers are listed in ``mcp_failures``."""
        agent = cls(**kwargs)
        agent._mcp_initialized = True  # connected here, or deliberately not at all
        if connect_mcp:
            await agent.initialize_mcp_servers()
        return agent

    async def initialize_mcp_servers(self) -> dict[str, str]:
        """Connect the servers of ``config.mcp_config.servers``; returns the failures."""
        if not config.is_loaded and not find_config_path().is_file():
            return {}  # no config file at all (the LLM was given in code): no servers
        servers = config.mcp_config.servers
        return await self.connect_mcp_servers(servers) if servers else {}
